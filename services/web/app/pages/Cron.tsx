import { useState, type FormEvent } from 'react';
import { ApiError, api, fetchAll, qs } from '../lib/api';
import { filterItems } from '../lib/lists';
import { notOwnerReason } from '../lib/permissions';
import { describeSchedule, SCHEDULE_PRESETS } from '../lib/cron';
import { useAction, useLoad } from '../lib/hooks';
import { platformName, type AgentListItem, type CronJob, type CronRun, type Page } from '@agentry/client';
import { CheckboxField, ErrorText, Loading, PageHeader, SearchField, SelectField, TextArea, TextField, Why, fmtTime } from '../components/ui';
import { useApp } from '../context';

const browserZone = (() => {
  try {
    return Intl.DateTimeFormat().resolvedOptions().timeZone || 'UTC';
  } catch {
    return 'UTC';
  }
})();

export function CronPage() {
  const { notify } = useApp();
  const jobs = useLoad(() => api.get<CronJob[]>('/cron'), []);
  const agents = useLoad(() => fetchAll<AgentListItem>('/agents'), []);
  const [search, setSearch] = useState('');
  const [creating, setCreating] = useState(false);
  const [history, setHistory] = useState<string | null>(null);
  const action = useAction();

  const toggle = async (job: CronJob) => {
    const updated = await action.run(() => api.put<CronJob>(`/cron/${encodeURIComponent(job.id)}/toggle`, { disabled: !job.disabled }));
    if (updated && jobs.data) {
      jobs.set(jobs.data.map((j) => (j.id === job.id ? updated : j)));
      notify(`${updated.name} ${updated.disabled ? 'disabled' : 'enabled'}`);
    }
  };
  const remove = async (job: CronJob) => {
    if (!window.confirm(`Delete cron job "${job.name}" and its history?`)) return;
    if (await action.run(() => api.delete(`/cron/${encodeURIComponent(job.id)}`))) {
      jobs.reload();
      notify(`${job.name} deleted`);
    }
  };

  return (
    <div className="page">
      <PageHeader title="Cron jobs">
        <button type="button" className="secondary" onClick={jobs.reload}>
          Refresh
        </button>
        <button type="button" onClick={() => setCreating((c) => !c)} aria-expanded={creating}>
          New cron job
        </button>
      </PageHeader>
      {creating ? (
        <CronForm
          agents={agents.data ?? []}
          onCancel={() => setCreating(false)}
          onCreated={(job) => {
            setCreating(false);
            jobs.set([...(jobs.data ?? []), job]);
            notify(`Cron job ${job.name} created`);
          }}
        />
      ) : null}
      <ErrorText error={jobs.error ?? action.error} />
      {!jobs.data ? (
        <Loading />
      ) : jobs.data.length === 0 ? (
        <p className="muted">No cron jobs yet.</p>
      ) : (
        <>
          {jobs.data.length > 5 ? <SearchField label="Search cron jobs" value={search} onValue={setSearch} /> : null}
          <JobsTable jobs={filterItems(jobs.data, search, (j) => [j.name, j.target, j.schedule, j.message, j.owner])} busy={action.busy} history={history} onToggle={(job) => void toggle(job)} onHistory={(id) => setHistory((h) => (h === id ? null : id))} onDelete={(job) => void remove(job)} />
        </>
      )}
    </div>
  );
}

function JobsTable({
  jobs,
  busy,
  history,
  onToggle,
  onHistory,
  onDelete,
}: {
  jobs: CronJob[];
  busy: boolean;
  history: string | null;
  onToggle: (job: CronJob) => void;
  onHistory: (id: string) => void;
  onDelete: (job: CronJob) => void;
}) {
  return (
    <div className="table-wrap">
      <table className="cron-table">
        <thead>
          <tr>
            <th scope="col">Enabled</th>
            <th scope="col">Name</th>
            <th scope="col">Schedule</th>
            <th scope="col">Agent</th>
            <th scope="col">Owner</th>
            <th scope="col">Next run</th>
            <th scope="col">Last run</th>
            <th scope="col">
              <span className="sr-only">Actions</span>
            </th>
          </tr>
        </thead>
        <tbody>
          {jobs.map((job) => (
            <JobRows key={job.id} job={job} busy={busy} historyOpen={history === job.id} onToggle={() => onToggle(job)} onHistory={() => onHistory(job.id)} onDelete={() => onDelete(job)} />
          ))}
        </tbody>
      </table>
    </div>
  );
}

/** A job's row, and its run history below it when open. */
function JobRows({ job, busy, historyOpen, onToggle, onHistory, onDelete }: { job: CronJob; busy: boolean; historyOpen: boolean; onToggle: () => void; onHistory: () => void; onDelete: () => void }) {
  const d = describeSchedule(job.schedule);
  const why = notOwnerReason(useApp().status, job.owner, 'cron job');
  return (
    <>
      <tr data-job={job.name}>
        <td>
          <label className="switch" title={why ?? undefined}>
            <input type="checkbox" checked={!job.disabled} onChange={onToggle} disabled={busy || why !== null} />
            <span className="sr-only">Enable {job.name}</span>
          </label>
        </td>
        <td>{job.name}</td>
        <td>
          <code>{job.schedule}</code>
          <div className="hint">
            {d.ok ? d.text : ''} ({job.timezone})
          </div>
        </td>
        <td>{job.target}</td>
        <td className="owner">{job.owner}</td>
        <td className="next-run">{job.disabled ? 'disabled' : fmtTime(job.nextRunAt)}</td>
        <td>
          {fmtTime(job.lastRunAt)}
          {job.lastStatus ? <span className={`badge status-${job.lastStatus}`}>{job.lastStatus}</span> : null}
        </td>
        <td className="actions-cell">
          <div className="row-actions">
            <button type="button" className="link-button" aria-expanded={historyOpen} onClick={onHistory}>
              History
            </button>
            <button type="button" className="link-button danger-text" onClick={onDelete} disabled={why !== null} title={why ?? undefined}>
              Delete
            </button>
            <Why reason={why} />
          </div>
        </td>
      </tr>
      {historyOpen ? (
        <tr>
          <td colSpan={8}>
            <RunHistory job={job} />
          </td>
        </tr>
      ) : null}
    </>
  );
}

/** A job's fires, newest first, 20 at a time with "Show more" until all are shown. */
function RunHistory({ job }: { job: CronJob }) {
  const [pages, setPages] = useState(1);
  const runs = useLoad(async () => {
    const all: CronRun[] = [];
    let total = 0;
    for (let page = 1; page <= pages; page++) {
      const p = await api.get<Page<CronRun>>(`/cron/${encodeURIComponent(job.id)}/runs${qs({ page, size: 20 })}`);
      all.push(...p.data);
      total = p.total;
    }
    return { data: all, total };
  }, [job.id, pages]);
  if (runs.error) return <ErrorText error={runs.error} />;
  if (!runs.data) return <Loading />;
  if (runs.data.data.length === 0) return <p className="muted">{job.name} has not fired yet.</p>;
  return (
    <>
      <RunsTable job={job} runs={runs.data.data} />
      <p className="muted">
        {runs.data.data.length} of {runs.data.total} fires.{' '}
        {runs.data.data.length < runs.data.total ? (
          <button type="button" className="link-button" onClick={() => setPages((n) => n + 1)} disabled={runs.loading}>
            Show more
          </button>
        ) : null}
      </p>
    </>
  );
}

function RunsTable({ job, runs }: { job: CronJob; runs: CronRun[] }) {
  return (
    <table className="runs">
      <caption>Latest fires of {job.name}</caption>
      <thead>
        <tr>
          <th scope="col">Tick</th>
          <th scope="col">Status</th>
          <th scope="col">Output or error</th>
          <th scope="col">Delivery</th>
        </tr>
      </thead>
      <tbody>
        {runs.map((r) => (
          <tr key={r.id}>
            <td>{fmtTime(r.scheduledAt)}</td>
            <td>
              <span className={`badge status-${r.status}`}>{r.status}</span>
            </td>
            <td className="excerpt">{r.error ?? r.outputExcerpt ?? ''}</td>
            <td>{r.deliveryStatus ? `${r.deliveryStatus}${r.deliveryError ? `: ${r.deliveryError}` : ''}` : '—'}</td>
          </tr>
        ))}
      </tbody>
    </table>
  );
}

type Deliver = { platform: string; accountId: string; chatId: string };

/** The field a 400's message is about: the gateway names it ("schedule: ...", "timezone: ..."), or the words tell. */
function fieldOfError(message: string): string {
  const m = /^(name|schedule|timezone|target|message|deliver)\b[:.]?\s*(.*)$/i.exec(message.replace(/^body\//, ''));
  return m?.[1]?.toLowerCase() ?? (/schedule|cron|field/i.test(message) ? 'schedule' : /time ?zone/i.test(message) ? 'timezone' : '');
}

function CronForm({ agents, onCreated, onCancel }: { agents: AgentListItem[]; onCreated: (job: CronJob) => void; onCancel: () => void }) {
  const [name, setName] = useState('');
  const [chosenTarget, setTarget] = useState('');
  // The agents may arrive after the form opened: the first one until another is chosen.
  const target = chosenTarget || (agents[0]?.ruleChain.id ?? '');
  const [schedule, setSchedule] = useState('0 0 9 * * *');
  const [timezone, setTimezone] = useState(browserZone);
  const [message, setMessage] = useState('');
  const [disabled, setDisabled] = useState(false);
  const [deliver, setDeliver] = useState<Deliver>({ platform: '', accountId: '', chatId: '' });
  const [fieldErrors, setFieldErrors] = useState<Record<string, string>>({});
  const action = useAction();
  const described = describeSchedule(schedule);

  const submit = async (e: FormEvent) => {
    e.preventDefault();
    setFieldErrors({});
    const job = await action.run(async () => {
      try {
        return await api.post<CronJob>('/cron', { name, target, schedule: schedule.trim(), timezone, message, disabled, ...(deliver.platform ? { deliver } : {}) });
      } catch (err) {
        const key = err instanceof ApiError && err.status === 400 ? fieldOfError(err.message) : '';
        if (key && err instanceof Error) {
          setFieldErrors({ [key]: err.message });
          return undefined;
        }
        throw err;
      }
    });
    if (job) onCreated(job);
  };

  return (
    <form className="form card" onSubmit={(e) => void submit(e)} aria-label="New cron job">
      <div className="grid-2">
        <TextField label="Name" value={name} onValue={setName} required error={fieldErrors.name} autoFocus />
        <SelectField
          label="Agent"
          value={target}
          onValue={setTarget}
          error={fieldErrors.target}
          options={agents.length ? agents.map((a) => ({ value: a.ruleChain.id, label: a.ruleChain.name || a.ruleChain.id })) : [{ value: '', label: 'No agents yet' }]}
        />
      </div>
      <div className="grid-2">
        <TextField
          label="Schedule (second minute hour day month weekday)"
          value={schedule}
          onValue={setSchedule}
          required
          spellCheck={false}
          error={fieldErrors.schedule ?? (described.ok ? null : described.error)}
          hint={described.ok ? <span className="schedule-description">{described.text}</span> : undefined}
        />
        <SelectField
          label="Quick pick"
          value=""
          onValue={(v) => v && setSchedule(v)}
          options={[{ value: '', label: 'Choose a common schedule…' }, ...SCHEDULE_PRESETS.map((p) => ({ value: p.schedule, label: `${p.label} (${p.schedule})` }))]}
        />
      </div>
      <TextField label="Time zone" value={timezone} onValue={setTimezone} error={fieldErrors.timezone} hint="Any IANA name, e.g. Europe/Berlin or UTC." />
      <TextArea label="Message" value={message} onValue={setMessage} rows={3} required error={fieldErrors.message} hint="Sent to the agent as the user turn at every fire." />
      <DeliverFields deliver={deliver} onDeliver={setDeliver} error={fieldErrors.deliver} />
      <CheckboxField label="Create it disabled" checked={disabled} onChecked={setDisabled} />
      <ErrorText error={action.error} />
      <div className="form-actions">
        <button type="submit" disabled={action.busy || !target}>
          {action.busy ? 'Creating…' : 'Create cron job'}
        </button>
        <button type="button" className="secondary" onClick={onCancel}>
          Cancel
        </button>
      </div>
    </form>
  );
}

function DeliverFields({ deliver, onDeliver, error }: { deliver: Deliver; onDeliver: (update: (d: Deliver) => Deliver) => void; error: string | undefined }) {
  return (
    <details className="field">
      <summary>Deliver the answer to a channel (optional)</summary>
      <div className="grid-3">
        <SelectField
          label="Platform"
          value={deliver.platform}
          onValue={(v) => onDeliver((d) => ({ ...d, platform: v }))}
          options={[{ value: '', label: 'No delivery' }, ...['chat_a', 'chat_a_webhook', 'chat_b', 'chat_c', 'chat_d', 'chat_e'].map((p) => ({ value: p, label: platformName(p) }))]}
        />
        <TextField label="Account ID" value={deliver.accountId} onValue={(v) => onDeliver((d) => ({ ...d, accountId: v }))} />
        <TextField label="Chat ID" value={deliver.chatId} onValue={(v) => onDeliver((d) => ({ ...d, chatId: v }))} />
      </div>
      <ErrorText error={error} />
    </details>
  );
}
