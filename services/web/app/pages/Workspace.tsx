import { useCallback, useEffect, useState, type FormEvent, type KeyboardEvent, type ReactNode } from 'react';
import { ApiError, api, downloadFile, fetchAll, messageOf, qs } from '../lib/api';
import { useAction, useLoad } from '../lib/hooks';
import { navigate } from '../lib/router';
import { notOwnerReason } from '../lib/permissions';
import type { AgentListItem, WorkspaceEntry } from '@agentry/client';
import { ErrorText, Loading, Notice, PageHeader, TextArea, TextField, fmtBytes, fmtTime } from '../components/ui';
import { useApp } from '../context';

const join = (dir: string, name: string) => (dir ? `${dir}/${name}` : name);
const parentOf = (path: string) => (path.includes('/') ? path.slice(0, path.lastIndexOf('/')) : '');
const baseName = (path: string) => path.slice(path.lastIndexOf('/') + 1);

type Listing = { entries: WorkspaceEntry[] } | { error: string } | 'loading';

/** An agent's workspace: a tree on the left, the selected file (view, edit, download) on the right. */
export function WorkspacePage({ agentId }: { agentId?: string | undefined }) {
  const agents = useLoad(async () => ({ data: await fetchAll<AgentListItem>('/agents') }), []);
  useEffect(() => {
    if (!agentId && agents.data?.data[0]) navigate(`/workspace/${encodeURIComponent(agents.data.data[0].ruleChain.id)}`, { replace: true });
  }, [agentId, agents.data]);
  // The workspace routes are the owner's (and admins'): say so rather than show their 403.
  const owner = agents.data?.data.find((a) => a.ruleChain.id === agentId)?.ruleChain.owner;
  const why = notOwnerReason(useApp().status, owner, 'agent');

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
      {agentId && why ? <Notice>{why} Its workspace is open to its owner and admins only.</Notice> : null}
      {agentId && !why ? <Browser agentId={agentId} /> : null}
    </div>
  );
}

type Selection = { path: string; isDir: boolean };

/** The tree's listings by directory and which directories are open; `refresh` lists changed ones again. */
function useTree(base: string) {
  const [listings, setListings] = useState<Record<string, Listing>>({});
  const [open, setOpen] = useState<Set<string>>(new Set(['']));

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
  const expand = (dir: string) => setOpen((o) => new Set(o).add(dir));

  return { listings, open, toggle, refresh, expand };
}

type Tree = ReturnType<typeof useTree>;

/** The entries of `dir` as tree items, open directories with their own entries below. */
function renderDir(tree: Tree, selected: Selection, onSelect: (s: Selection) => void, dir: string, depth: number): ReactNode {
  const listing = tree.listings[dir];
  if (listing === undefined || listing === 'loading') return <li className="muted tree-note">Loading…</li>;
  if ('error' in listing) return <li className="error-text tree-note">{listing.error}</li>;
  if (listing.entries.length === 0) return <li className="muted tree-note">(empty)</li>;
  return listing.entries.map((e) => {
    const path = join(dir, e.name);
    const isOpen = tree.open.has(path);
    return (
      <li key={path}>
        <button
          type="button"
          data-path={path}
          data-dir={e.isDir ? 'true' : undefined}
          aria-expanded={e.isDir ? isOpen : undefined}
          aria-current={selected.path === path ? 'true' : undefined}
          className={`tree-item${selected.path === path ? ' selected' : ''}`}
          style={{ paddingLeft: `${0.5 + depth * 1}rem` }}
          onClick={() => {
            onSelect({ path, isDir: e.isDir });
            if (e.isDir) tree.toggle(path);
          }}
        >
          <span aria-hidden="true">{e.isDir ? (isOpen ? '▾ ' : '▸ ') : '· '}</span>
          {e.name}
          {e.isDir ? '/' : ''}
        </button>
        {e.isDir && isOpen ? <ul>{renderDir(tree, selected, onSelect, path, depth + 1)}</ul> : null}
      </li>
    );
  });
}

/**
 * Arrow keys in the tree, over the entries shown (their buttons in document order): up and down
 * move, right opens a folder (or enters an open one), left closes it (or goes to the parent),
 * Home and End jump. Enter and Space stay the buttons' own (select, open).
 */
function treeKeys(e: KeyboardEvent<HTMLElement>, tree: Tree): void {
  const items = Array.from(e.currentTarget.querySelectorAll<HTMLButtonElement>('button.tree-item'));
  const current = e.target instanceof HTMLButtonElement ? e.target : null;
  const i = current ? items.indexOf(current) : -1;
  if (i < 0) return;
  const path = current!.dataset.path ?? '';
  const isDir = current!.dataset.dir === 'true';
  const open = isDir && (path === '' || tree.open.has(path));
  const focus = (el: HTMLButtonElement | undefined) => el?.focus();
  const byPath = (p: string) => items.find((b) => b.dataset.path === p);
  switch (e.key) {
    case 'ArrowDown':
      focus(items[i + 1]);
      break;
    case 'ArrowUp':
      focus(items[i - 1]);
      break;
    case 'Home':
      focus(items[0]);
      break;
    case 'End':
      focus(items[items.length - 1]);
      break;
    case 'ArrowRight':
      if (isDir && !open) tree.toggle(path);
      else if (open) focus(items[i + 1]);
      break;
    case 'ArrowLeft':
      if (open && path !== '') tree.toggle(path);
      else if (path !== '') focus(byPath(parentOf(path)));
      break;
    default:
      return;
  }
  e.preventDefault();
}

function Browser({ agentId }: { agentId: string }) {
  const { notify } = useApp();
  const base = `/agents/${encodeURIComponent(agentId)}/workspace`;
  const tree = useTree(base);
  const [selected, setSelected] = useState<Selection>({ path: '', isDir: true });
  const currentDir = selected.isDir ? selected.path : parentOf(selected.path);
  const created = (path: string, isDir: boolean) => {
    tree.refresh(currentDir);
    tree.expand(currentDir);
    setSelected({ path, isDir });
    notify(`${isDir ? 'Folder' : 'File'} ${path} created`);
  };

  return (
    <div className="workspace">
      <nav className="tree" aria-label="Files" aria-describedby="tree-keys" onKeyDown={(e) => treeKeys(e, tree)}>
        <p id="tree-keys" className="sr-only">
          Up and down arrows move between entries, right opens a folder or enters it, left closes it or goes to its parent, Home and End jump to the first and last.
        </p>
        <button
          type="button"
          data-path=""
          data-dir="true"
          className={`tree-item root${selected.path === '' ? ' selected' : ''}`}
          aria-current={selected.path === '' ? 'true' : undefined}
          onClick={() => setSelected({ path: '', isDir: true })}
        >
          / (root)
        </button>
        <ul aria-label={`Workspace of ${agentId}`}>{renderDir(tree, selected, setSelected, '', 0)}</ul>
      </nav>
      <section className="workspace-pane" aria-label="Selected entry">
        {selected.isDir ? (
          <DirPanel
            base={base}
            dir={currentDir}
            onCreated={created}
            onChanged={(newPath) => {
              tree.refresh(parentOf(currentDir), parentOf(newPath ?? currentDir));
              setSelected({ path: newPath ?? parentOf(currentDir), isDir: true });
            }}
          />
        ) : (
          <>
            {/* The file's folder keeps its New file, New folder and Upload while a file is open. */}
            <DirPanel key={currentDir} compact base={base} dir={currentDir} onCreated={created} onChanged={() => undefined} />
            <FilePanel
            key={selected.path}
            base={base}
            path={selected.path}
            onChanged={(newPath) => {
              tree.refresh(parentOf(selected.path), newPath ? parentOf(newPath) : parentOf(selected.path));
              setSelected(newPath ? { path: newPath, isDir: false } : { path: parentOf(selected.path), isDir: true });
            }}
            />
          </>
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

type DirMode = 'none' | 'file' | 'dir' | 'rename';
type DirEvents = { onCreated: (path: string, isDir: boolean) => void; onChanged: (newPath?: string) => void };

/** What the folder's buttons do: create, rename, upload (replacing after a confirm), delete. */
function useDirActions(base: string, dir: string, { onCreated, onChanged }: DirEvents) {
  const { notify } = useApp();
  const [mode, setMode] = useState<DirMode>('none');
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
  const start = (next: DirMode, initial = '') => {
    setMode(next);
    setName(initial);
  };
  return { mode, setMode, name, setName, action, create, rename, upload, remove, start };
}

/**
 * A folder's actions. `compact`: the bar over an open file, for the file's folder: New file, New
 * folder and Upload only (the folder's Rename and Delete are on the folder itself).
 */
function DirPanel({ base, dir, onCreated, onChanged, compact = false }: { base: string; dir: string; compact?: boolean } & DirEvents) {
  const d = useDirActions(base, dir, { onCreated, onChanged });
  const { mode, action } = d;
  return (
    <div className={compact ? 'folder-bar' : undefined}>
      {compact ? null : <h2 className="pane-title">{dir ? `${dir}/` : 'Workspace root'}</h2>}
      <div className="toolbar">
        {compact ? <span className="muted">In {dir ? `${dir}/` : 'the root'}:</span> : null}
        <button type="button" className="secondary" onClick={() => d.start('file')}>
          New file
        </button>
        <button type="button" className="secondary" onClick={() => d.start('dir')}>
          New folder
        </button>
        <label className="button secondary file-button">
          Upload file
          <input type="file" className="sr-only" onChange={(e) => void d.upload(e.target.files).finally(() => (e.target.value = ''))} />
        </label>
        {dir && !compact ? (
          <>
            <button type="button" className="secondary" onClick={() => d.start('rename', baseName(dir))}>
              Rename
            </button>
            <button type="button" className="danger" onClick={() => void d.remove()}>
              Delete
            </button>
          </>
        ) : null}
      </div>
      {mode === 'file' || mode === 'dir' ? (
        <NameForm
          label={mode === 'file' ? 'New file name' : 'New folder name'}
          hint={`In ${dir || 'the root'}; a name with / creates folders on the way.`}
          submit="Create"
          name={d.name}
          onName={d.setName}
          busy={action.busy}
          onSubmit={(e) => void d.create(e)}
          onCancel={() => d.setMode('none')}
        />
      ) : null}
      {mode === 'rename' ? (
        <NameForm label="New name" submit="Rename" name={d.name} onName={d.setName} busy={action.busy} onSubmit={(e) => void d.rename(e)} onCancel={() => d.setMode('none')} />
      ) : null}
      <ErrorText error={action.error} />
      {compact ? null : <p className="muted">Choose a file in the tree to view or edit it.</p>}
    </div>
  );
}

/** The folder's inline form for a name: a new file's or folder's, or the folder's new name. */
function NameForm(props: { label: string; hint?: string; submit: string; name: string; onName: (v: string) => void; busy: boolean; onSubmit: (e: FormEvent) => void; onCancel: () => void }) {
  return (
    <form className="form inline-form" onSubmit={props.onSubmit}>
      <TextField label={props.label} value={props.name} onValue={props.onName} required autoFocus {...(props.hint !== undefined ? { hint: props.hint } : {})} />
      <div className="form-actions">
        <button type="submit" disabled={props.busy || !props.name.trim()}>
          {props.submit}
        </button>
        <button type="button" className="secondary" onClick={props.onCancel}>
          Cancel
        </button>
      </div>
    </form>
  );
}

/** The file's text as edited, and what its buttons do: save, rename (or move), delete. */
function useFileEditor(base: string, path: string, onChanged: (newPath?: string) => void) {
  const { notify } = useApp();
  const file = useLoad(() => api.get<{ content: string; encoding?: 'base64' }>(`${base}/file${qs({ path })}`), [base, path]);
  const [text, setText] = useState<string | null>(null);
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
  const download = () => void action.run(() => downloadFile(`${base}/download${qs({ path })}`, baseName(path)));
  return { file, binary, value, dirty, setText, newName, setNewName, action, save, rename, remove, download };
}

function FilePanel({ base, path, onChanged }: { base: string; path: string; onChanged: (newPath?: string) => void }) {
  const f = useFileEditor(base, path, onChanged);
  const [renaming, setRenaming] = useState(false);
  const { file, binary, action } = f;
  return (
    <div>
      <h2 className="pane-title">{path}</h2>
      <div className="toolbar">
        {!binary ? (
          <button type="button" onClick={() => void f.save()} disabled={action.busy || !f.dirty}>
            {action.busy ? 'Saving…' : 'Save'}
          </button>
        ) : null}
        <button type="button" className="secondary" onClick={f.download}>
          Download
        </button>
        <button type="button" className="secondary" onClick={() => setRenaming((r) => !r)} aria-expanded={renaming}>
          Rename
        </button>
        <button type="button" className="danger" onClick={() => void f.remove()}>
          Delete
        </button>
        {f.dirty ? <span className="muted">Unsaved changes</span> : null}
      </div>
      {renaming ? (
        <form className="form inline-form" onSubmit={(e) => void f.rename(e)}>
          <TextField label="New name" value={f.newName} onValue={f.setNewName} required autoFocus hint="A name renames in place; a path with / moves it from the root." />
          <div className="form-actions">
            <button type="submit" disabled={action.busy}>
              Rename
            </button>
          </div>
        </form>
      ) : null}
      <ErrorText error={action.error ?? file.error} />
      <FileContent f={f} />
      <FileMeta base={base} path={path} />
    </div>
  );
}

function FileContent({ f }: { f: ReturnType<typeof useFileEditor> }) {
  const { file } = f;
  if (!file.data) return file.error ? null : <Loading />;
  if (f.binary) return <p className="muted">Binary file ({fmtBytes(Math.floor((file.data.content.length * 3) / 4))}): download it to view.</p>;
  return (
    <TextArea
      label="Content"
      className="file-editor"
      value={f.value}
      onValue={f.setText}
      rows={22}
      spellCheck={false}
      onKeyDown={(e) => {
        if ((e.ctrlKey || e.metaKey) && e.key === 's') {
          e.preventDefault();
          void f.save();
        }
      }}
    />
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
