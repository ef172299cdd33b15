import { useCallback, useEffect, useState, type FormEvent } from 'react';
import { ApiError, api, downloadFile, messageOf, qs } from '../lib/api';
import { useAction, useLoad } from '../lib/hooks';
import { navigate } from '../lib/router';
import type { AgentListItem, Page, WorkspaceEntry } from '@agentry/client';
import { ErrorText, Loading, PageHeader, TextArea, TextField, fmtBytes, fmtTime } from '../components/ui';
import { useApp } from '../context';

const join = (dir: string, name: string) => (dir ? `${dir}/${name}` : name);
const parentOf = (path: string) => (path.includes('/') ? path.slice(0, path.lastIndexOf('/')) : '');
const baseName = (path: string) => path.slice(path.lastIndexOf('/') + 1);

type Listing = { entries: WorkspaceEntry[] } | { error: string } | 'loading';

/** An agent's workspace: a tree on the left, the selected file (view, edit, download) on the right. */
export function WorkspacePage({ agentId }: { agentId?: string | undefined }) {
  const agents = useLoad(() => api.get<Page<AgentListItem>>('/agents?size=100'), []);
  useEffect(() => {
    if (!agentId && agents.data?.data[0]) navigate(`/workspace/${encodeURIComponent(agents.data.data[0].ruleChain.id)}`, { replace: true });
  }, [agentId, agents.data]);

  return (
    <div className="page">
      <PageHeader title="Workspace">
        <label className="inline-field">
          <span>Agent</span>
          <select value={agentId ?? ''} onChange={(e) => navigate(`/workspace/${encodeURIComponent(e.target.value)}`)}>
            {!agentId ? <option value="">Choose an agent</option> : null}
            {agents.data?.data.map((a) => (
              <option key={a.ruleChain.id} value={a.ruleChain.id}>
                {a.ruleChain.name || a.ruleChain.id}
              </option>
            ))}
          </select>
        </label>
      </PageHeader>
      <ErrorText error={agents.error} />
      {agents.data && agents.data.data.length === 0 ? <p className="muted">No agents, so no workspaces.</p> : null}
      {agentId ? <Browser agentId={agentId} /> : null}
    </div>
  );
}

function Browser({ agentId }: { agentId: string }) {
  const { notify } = useApp();
  const base = `/agents/${encodeURIComponent(agentId)}/workspace`;
  const [listings, setListings] = useState<Record<string, Listing>>({});
  const [open, setOpen] = useState<Set<string>>(new Set(['']));
  const [selected, setSelected] = useState<{ path: string; isDir: boolean }>({ path: '', isDir: true });

  const loadDir = useCallback(
    async (dir: string) => {
      setListings((l) => ({ ...l, [dir]: 'loading' }));
      try {
        const entries = await api.get<WorkspaceEntry[]>(`${base}/entries${qs({ path: dir })}`);
        entries.sort((a, b) => Number(b.isDir) - Number(a.isDir) || a.name.localeCompare(b.name));
        setListings((l) => ({ ...l, [dir]: { entries } }));
      } catch (err) {
        setListings((l) => ({ ...l, [dir]: { error: messageOf(err) } }));
      }
    },
    [base],
  );

  useEffect(() => {
    void loadDir('');
  }, [loadDir]);

  const toggle = (dir: string) => {
    setOpen((o) => {
      const next = new Set(o);
      if (next.has(dir)) next.delete(dir);
      else {
        next.add(dir);
        void loadDir(dir);
      }
      return next;
    });
  };

  /** After a change: list the directories involved again. */
  const refresh = (...dirs: string[]) => {
    for (const d of new Set(dirs)) if (d === '' || open.has(d)) void loadDir(d);
  };

  const currentDir = selected.isDir ? selected.path : parentOf(selected.path);

  const renderDir = (dir: string, depth: number) => {
    const listing = listings[dir];
    if (listing === undefined || listing === 'loading') return <li className="muted tree-note">Loading…</li>;
    if ('error' in listing) return <li className="error-text tree-note">{listing.error}</li>;
    if (listing.entries.length === 0) return <li className="muted tree-note">(empty)</li>;
    return listing.entries.map((e) => {
      const path = join(dir, e.name);
      const isOpen = open.has(path);
      return (
        <li key={path}>
          <button
            type="button"
            aria-expanded={e.isDir ? isOpen : undefined}
            aria-current={selected.path === path ? 'true' : undefined}
            className={`tree-item${selected.path === path ? ' selected' : ''}`}
            style={{ paddingLeft: `${0.5 + depth * 1}rem` }}
            onClick={() => {
              setSelected({ path, isDir: e.isDir });
              if (e.isDir) toggle(path);
            }}
          >
            <span aria-hidden="true">{e.isDir ? (isOpen ? '▾ ' : '▸ ') : '· '}</span>
            {e.name}
            {e.isDir ? '/' : ''}
          </button>
          {e.isDir && isOpen ? <ul>{renderDir(path, depth + 1)}</ul> : null}
        </li>
      );
    });
  };

  return (
    <div className="workspace">
      <nav className="tree" aria-label="Files">
        <button
          type="button"
          className={`tree-item root${selected.path === '' ? ' selected' : ''}`}
          aria-current={selected.path === '' ? 'true' : undefined}
          onClick={() => setSelected({ path: '', isDir: true })}
        >
          / (root)
        </button>
        <ul aria-label={`Workspace of ${agentId}`}>
          {renderDir('', 0)}
        </ul>
      </nav>
      <section className="workspace-pane" aria-label="Selected entry">
        {selected.isDir ? (
          <DirPanel
            base={base}
            dir={currentDir}
            onCreated={(path, isDir) => {
              refresh(currentDir);
              setOpen((o) => new Set(o).add(currentDir));
              setSelected({ path, isDir });
              notify(`${isDir ? 'Folder' : 'File'} ${path} created`);
            }}
            onChanged={(newPath) => {
              refresh(parentOf(currentDir), parentOf(newPath ?? currentDir));
              setSelected({ path: newPath ?? parentOf(currentDir), isDir: true });
            }}
          />
        ) : (
          <FilePanel
            key={selected.path}
            base={base}
            path={selected.path}
            onChanged={(newPath) => {
              refresh(parentOf(selected.path), newPath ? parentOf(newPath) : parentOf(selected.path));
              setSelected(newPath ? { path: newPath, isDir: false } : { path: parentOf(selected.path), isDir: true });
            }}
          />
        )}
      </section>
    </div>
  );
}

function readBase64(file: File): Promise<string> {
  return new Promise((resolve, reject) => {
    const reader = new FileReader();
    reader.onload = () => resolve(String(reader.result).replace(/^data:[^,]*,/, ''));
    reader.onerror = () => reject(reader.error ?? new Error('could not read the file'));
    reader.readAsDataURL(file);
  });
}

function DirPanel({ base, dir, onCreated, onChanged }: { base: string; dir: string; onCreated: (path: string, isDir: boolean) => void; onChanged: (newPath?: string) => void }) {
  const { notify } = useApp();
  const [mode, setMode] = useState<'none' | 'file' | 'dir' | 'rename'>('none');
  const [name, setName] = useState('');
  const action = useAction();

  const create = async (e: FormEvent) => {
    e.preventDefault();
    const path = join(dir, name.trim());
    const ok = await action.run(() => (mode === 'file' ? api.post(`${base}/files`, { path, content: '' }) : api.post(`${base}/dirs`, { path })));
    if (ok) {
      setMode('none');
      setName('');
      onCreated(path, mode === 'dir');
    }
  };

  const rename = async (e: FormEvent) => {
    e.preventDefault();
    const done = await action.run(() => api.patch<{ path: string }>(`${base}/rename${qs({ path: dir })}`, { newName: name.trim() }));
    if (done) {
      setMode('none');
      notify(`Renamed to ${done.path}`);
      onChanged(done.path);
    }
  };

  const upload = async (files: FileList | null) => {
    const file = files?.[0];
    if (!file) return;
    const path = join(dir, file.name);
    const ok = await action.run(async () => {
      const content = await readBase64(file);
      try {
        return await api.post(`${base}/files`, { path, content, encoding: 'base64' });
      } catch (err) {
        if (err instanceof ApiError && err.status === 409 && window.confirm(`${path} exists. Replace it?`)) {
          return api.put(`${base}/file${qs({ path })}`, { content, encoding: 'base64' });
        }
        throw err;
      }
    });
    if (ok) onCreated(path, false);
  };

  const remove = async () => {
    if (!window.confirm(`Delete the folder ${dir} and everything in it?`)) return;
    if (await action.run(() => api.delete(`${base}/entry${qs({ path: dir })}`))) {
      notify(`Deleted ${dir}`);
      onChanged();
    }
  };

  return (
    <div>
      <h2 className="pane-title">{dir ? `${dir}/` : 'Workspace root'}</h2>
      <div className="toolbar">
        <button type="button" className="secondary" onClick={() => (setMode('file'), setName(''))}>
          New file
        </button>
        <button type="button" className="secondary" onClick={() => (setMode('dir'), setName(''))}>
          New folder
        </button>
        <label className="button secondary file-button">
          Upload file
          <input type="file" className="sr-only" onChange={(e) => void upload(e.target.files).finally(() => (e.target.value = ''))} />
        </label>
        {dir ? (
          <>
            <button type="button" className="secondary" onClick={() => (setMode('rename'), setName(baseName(dir)))}>
              Rename
            </button>
            <button type="button" className="danger" onClick={() => void remove()}>
              Delete
            </button>
          </>
        ) : null}
      </div>
      {mode === 'file' || mode === 'dir' ? (
        <form className="form inline-form" onSubmit={(e) => void create(e)}>
          <TextField label={mode === 'file' ? 'New file name' : 'New folder name'} value={name} onValue={setName} required autoFocus hint={`In ${dir || 'the root'}; a name with / creates folders on the way.`} />
          <div className="form-actions">
            <button type="submit" disabled={action.busy || !name.trim()}>
              Create
            </button>
            <button type="button" className="secondary" onClick={() => setMode('none')}>
              Cancel
            </button>
          </div>
        </form>
      ) : null}
      {mode === 'rename' ? (
        <form className="form inline-form" onSubmit={(e) => void rename(e)}>
          <TextField label="New name" value={name} onValue={setName} required autoFocus />
          <div className="form-actions">
            <button type="submit" disabled={action.busy || !name.trim()}>
              Rename
            </button>
            <button type="button" className="secondary" onClick={() => setMode('none')}>
              Cancel
            </button>
          </div>
        </form>
      ) : null}
      <ErrorText error={action.error} />
      <p className="muted">Choose a file in the tree to view or edit it.</p>
    </div>
  );
}

function FilePanel({ base, path, onChanged }: { base: string; path: string; onChanged: (newPath?: string) => void }) {
  const { notify } = useApp();
  const file = useLoad(() => api.get<{ content: string; encoding?: 'base64' }>(`${base}/file${qs({ path })}`), [base, path]);
  const [text, setText] = useState<string | null>(null);
  const [renaming, setRenaming] = useState(false);
  const [newName, setNewName] = useState(baseName(path));
  const action = useAction();
  const binary = file.data?.encoding === 'base64';
  const value = text ?? (file.data && !binary ? file.data.content : '');
  const dirty = text !== null && text !== file.data?.content;

  const save = async () => {
    const saved = await action.run(() => api.put<WorkspaceEntry & { path: string }>(`${base}/file${qs({ path })}`, { content: value }));
    if (saved) {
      file.set({ content: value });
      setText(null);
      notify(`Saved ${path}`);
    }
  };

  const rename = async (e: FormEvent) => {
    e.preventDefault();
    const done = await action.run(() => api.patch<{ path: string }>(`${base}/rename${qs({ path })}`, { newName: newName.trim() }));
    if (done) {
      notify(`Renamed to ${done.path}`);
      onChanged(done.path);
    }
  };

  const remove = async () => {
    if (!window.confirm(`Delete ${path}?`)) return;
    if (await action.run(() => api.delete(`${base}/entry${qs({ path })}`))) {
      notify(`Deleted ${path}`);
      onChanged();
    }
  };

  return (
    <div>
      <h2 className="pane-title">{path}</h2>
      <div className="toolbar">
        {!binary ? (
          <button type="button" onClick={() => void save()} disabled={action.busy || !dirty}>
            {action.busy ? 'Saving…' : 'Save'}
          </button>
        ) : null}
        <button type="button" className="secondary" onClick={() => void action.run(() => downloadFile(`${base}/download${qs({ path })}`, baseName(path)))}>
          Download
        </button>
        <button type="button" className="secondary" onClick={() => setRenaming((r) => !r)} aria-expanded={renaming}>
          Rename
        </button>
        <button type="button" className="danger" onClick={() => void remove()}>
          Delete
        </button>
        {dirty ? <span className="muted">Unsaved changes</span> : null}
      </div>
      {renaming ? (
        <form className="form inline-form" onSubmit={(e) => void rename(e)}>
          <TextField label="New name" value={newName} onValue={setNewName} required autoFocus hint="A name renames in place; a path with / moves it from the root." />
          <div className="form-actions">
            <button type="submit" disabled={action.busy}>
              Rename
            </button>
          </div>
        </form>
      ) : null}
      <ErrorText error={action.error ?? file.error} />
      {!file.data ? (
        file.error ? null : <Loading />
      ) : binary ? (
        <p className="muted">Binary file ({fmtBytes(Math.floor((file.data.content.length * 3) / 4))}): download it to view.</p>
      ) : (
        <TextArea
          label="Content"
          className="file-editor"
          value={value}
          onValue={setText}
          rows={22}
          spellCheck={false}
          onKeyDown={(e) => {
            if ((e.ctrlKey || e.metaKey) && e.key === 's') {
              e.preventDefault();
              void save();
            }
          }}
        />
      )}
      <FileMeta base={base} path={path} />
    </div>
  );
}

function FileMeta({ base, path }: { base: string; path: string }) {
  const listing = useLoad(() => api.get<WorkspaceEntry[]>(`${base}/entries${qs({ path: parentOf(path) })}`), [base, path]);
  const entry = listing.data?.find((e) => e.name === baseName(path));
  return entry ? (
    <p className="muted small">
      {fmtBytes(entry.size)} · modified {fmtTime(entry.modTime)}
    </p>
  ) : null;
}
