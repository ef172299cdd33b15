import { Fragment, useState, type FormEvent } from 'react';
import { ApiError, api, qs } from '../lib/api';
import { describeSchedule, SCHEDULE_PRESETS } from '../lib/cron';
import { useAction, useLoad } from '../lib/hooks';
import type { AgentListItem, CronJob, CronRun, Page } from '@agentry/client';
import { CheckboxField, ErrorText, Loading, PageHeader, SelectField, TextArea, TextField, fmtTime } from '../components/ui';
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
  const agents = useLoad(() => api.get<Page<AgentListItem>>('/agents?size=100'), []);
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
          agents={agents.data?.data ?? []}
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
        <div className="table-wrap">
          <table className="cron-table">
            <thead>
              <tr>
                <th scope="col">Enabled</th>
                <th scope="col">Name</th>
                <th scope="col">Schedule</th>
                <th scope="col">Agent</th>
                <th scope="col">Next run</th>
                <th scope="col">Last run</th>
                <th scope="col">
                  <span className="sr-only">Actions</span>
                </th>
              </tr>
            </thead>
            <tbody>
              {jobs.data.map((job) => {
                const d = describeSchedule(job.schedule);
                return (
                  <Fragment key={job.id}>
                    <tr data-job={job.name}>
                      <td>
                        <label className="switch">
                          <input type="checkbox" checked={!job.disabled} onChange={() => void toggle(job)} disabled={action.busy} />
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
                      <td className="next-run">{job.disabled ? 'disabled' : fmtTime(job.nextRunAt)}</td>
                      <td>
                        {fmtTime(job.lastRunAt)}
                        {job.lastStatus ? <span className={`badge status-${job.lastStatus}`}>{job.lastStatus}</span> : null}
                      </td>
                      <td className="row-actions">
                        <button type="button" className="link-button" aria-expanded={history === job.id} onClick={() => setHistory((h) => (h === job.id ? null : job.id))}>
                          History
                        </button>
                        <button type="button" className="link-button danger-text" onClick={() => void remove(job)}>
                          Delete
                        </button>
                      </td>
                    </tr>
                    {history === job.id ? (
                      <tr>
                        <td colSpan={7}>
                          <RunHistory job={job} />
                        </td>
                      </tr>
                    ) : null}
                  </Fragment>
                );
              })}
            </tbody>
          </table>
        </div>
      )}
    </div>
  );
}

function RunHistory({ job }: { job: CronJob }) {
  const runs = useLoad(() => api.get<Page<CronRun>>(`/cron/${encodeURIComponent(job.id)}/runs${qs({ size: 20 })}`), [job.id]);
  if (runs.error) return <ErrorText error={runs.error} />;
  if (!runs.data) return <Loading />;
  if (runs.data.data.length === 0) return <p className="muted">{job.name} has not fired yet.</p>;
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
        {runs.data.data.map((r) => (
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

function CronForm({ agents, onCreated, onCancel }: { agents: AgentListItem[]; onCreated: (job: CronJob) => void; onCancel: () => void }) {
  const [name, setName] = useState('');
  const [chosenTarget, setTarget] = useState('');
  // The agents may arrive after the form opened: the first one until another is chosen.
  const target = chosenTarget || (agents[0]?.ruleChain.id ?? '');
  const [schedule, setSchedule] = useState('0 0 9 * * *');
  const [timezone, setTimezone] = useState(browserZone);
  const [message, setMessage] = useState('');
  const [disabled, setDisabled] = useState(false);
  const [deliver, setDeliver] = useState({ platform: '', accountId: '', chatId: '' });
  const [fieldErrors, setFieldErrors] = useState<Record<string, string>>({});
  const action = useAction();
  const described = describeSchedule(schedule);

  const submit = async (e: FormEvent) => {
    e.preventDefault();
    setFieldErrors({});
    const job = await action.run(async () => {
      try {
        return await api.post<CronJob>('/cron', {
          name,
          target,
          schedule: schedule.trim(),
          timezone,
          message,
          disabled,
          ...(deliver.platform ? { deliver } : {}),
        });
      } catch (err) {
        if (err instanceof ApiError && err.status === 400) {
          // The gateway names the field: "schedule: ...", "timezone: ...", "target: ...".
          const m = /^(name|schedule|timezone|target|message|deliver)\b[:.]?\s*(.*)$/i.exec(err.message.replace(/^body\//, ''));
          const key = m?.[1]?.toLowerCase() ?? (/schedule|cron|field/i.test(err.message) ? 'schedule' : /time ?zone/i.test(err.message) ? 'timezone' : '');
          if (key) {
            setFieldErrors({ [key]: err.message });
            return undefined;
          }
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
      <details className="field">
        <summary>Deliver the answer to a channel (optional)</summary>
        <div className="grid-3">
          <SelectField
            label="Platform"
            value={deliver.platform}
            onValue={(v) => setDeliver((d) => ({ ...d, platform: v }))}
            options={[{ value: '', label: 'No delivery' }, ...['chat_a', 'chat_a_webhook', 'chat_b', 'chat_c', 'chat_d', 'chat_e'].map((p) => ({ value: p, label: p }))]}
          />
          <TextField label="Account id" value={deliver.accountId} onValue={(v) => setDeliver((d) => ({ ...d, accountId: v }))} />
          <TextField label="Chat id" value={deliver.chatId} onValue={(v) => setDeliver((d) => ({ ...d, chatId: v }))} />
        </div>
        <ErrorText error={fieldErrors.deliver} />
      </details>
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
