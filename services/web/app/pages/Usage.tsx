import { useEffect, useRef, useState } from 'react';
import uPlot from 'uplot';
import 'uplot/dist/uPlot.min.css';
import type { UsageGroupBy, UsageReport, UsageRow } from '@agentry/client';
import { client } from '../lib/api';
import { useLoad } from '../lib/hooks';
import { dailySeries, daysBetween, lastDays, principalLabel } from '../lib/usage';
import { ErrorText, Loading, PageHeader, SelectField } from '../components/ui';
import { useApp } from '../context';

const PERIODS = [
  { value: '7', label: 'Last 7 days' },
  { value: '30', label: 'Last 30 days' },
  { value: '90', label: 'Last 90 days' },
];

const fmt = (n: number) => n.toLocaleString('en-US');
const DAY = 86_400;

/**
 * Token usage (`GET /usage`): tokens per day as a chart, then totals by agent, provider and
 * (admins) principal. A user sees its own usage, an admin everyone's.
 */
export function UsagePage() {
  const { status } = useApp();
  const admin = !status.requireAuth || status.user?.role === 'admin';
  const [period, setPeriod] = useState('30');
  const report = useLoad(async () => {
    const { from, to } = lastDays(Number(period));
    const get = (groupBy: UsageGroupBy) => client.usage.get({ groupBy, from: from.toISOString(), to: to.toISOString() });
    const [day, agent, provider, principal] = await Promise.all([get('day'), get('agent'), get('provider'), admin ? get('principal') : null]);
    return { from, to, day, agent, provider, principal };
  }, [period, admin]);
  const data = report.data;
  return (
    <div className="page">
      <PageHeader title="Usage">
        <button type="button" className="secondary" onClick={report.reload}>
          Refresh
        </button>
      </PageHeader>
      <p className="muted">
        Prompt and completion tokens of every model call, as the providers reported them{admin ? ', for everyone' : ', of your own chats'}. Days are UTC.
      </p>
      <SelectField label="Period" value={period} onValue={setPeriod} options={PERIODS} className="usage-period" />
      <ErrorText error={report.error} />
      {report.loading && !data ? <Loading what="Loading usage" /> : null}
      {data ? (
        <>
          <TokensChart rows={data.day.data} days={daysBetween(data.from, data.to)} />
          <Totals title="By agent" report={data.agent} />
          <Totals title="By provider" report={data.provider} />
          {data.principal ? <Totals title="By who asked" report={data.principal} label={principalLabel} /> : null}
        </>
      ) : null}
    </div>
  );
}

/** Tokens per day, prompt and completion, drawn by uPlot into its own element. */
function TokensChart({ rows, days }: { rows: readonly UsageRow[]; days: readonly string[] }) {
  const box = useRef<HTMLDivElement>(null);
  useEffect(() => {
    const el = box.current;
    if (!el) return;
    const series = dailySeries(rows, days);
    const width = Math.max(320, Math.min(el.clientWidth || 800, 1000));
    const plot = new uPlot(
      {
        width,
        height: 260,
        scales: { x: { time: true } },
        // The legend reads values only under the cursor: away from the chart it is the key alone,
        // with no "--" placeholders (uPlot's) and no day row ("Time") until a day is pointed at.
        series: [
          { label: 'Day', value: (_u, v) => (v == null ? '' : new Date(v * 1000).toISOString().slice(0, 10)) },
          { label: 'Prompt tokens', stroke: '#2f5fd0', fill: 'rgba(47, 95, 208, 0.12)', value: (_u, v) => (v == null ? '' : fmt(v)) },
          { label: 'Completion tokens', stroke: '#1e8a4c', fill: 'rgba(30, 138, 76, 0.12)', value: (_u, v) => (v == null ? '' : fmt(v)) },
        ],
        hooks: { setLegend: [(u) => u.root.classList.toggle('pointing', u.legend.idx != null)] },
        // Whole UTC days on the time axis (the points are days), tokens with thousands separators.
        axes: [
          { incrs: [DAY, 7 * DAY, 30 * DAY], values: (_u, ticks) => ticks.map((t) => new Date(t * 1000).toISOString().slice(5, 10)) },
          { values: (_u, ticks) => ticks.map((t) => fmt(t)), size: 70 },
        ],
      },
      [series.x, series.prompt, series.completion],
      el,
    );
    return () => plot.destroy();
  }, [rows, days]);
  const total = rows.reduce((sum, r) => sum + r.totalTokens, 0);
  return (
    <section aria-label="Tokens per day" className="usage-chart">
      <h2>Tokens per day</h2>
      <p className="muted">{total === 0 ? 'No model calls in this period.' : `${fmt(total)} tokens in this period.`}</p>
      <div ref={box} role="img" aria-label={`Chart of prompt and completion tokens per day, ${fmt(total)} in all`} />
    </section>
  );
}

/** A table's first header from its title, in the case of the others: "By who asked" -> "Who asked". */
function headerOf(title: string): string {
  const what = title.replace(/^By /, '');
  return what.charAt(0).toUpperCase() + what.slice(1);
}

function Totals({ title, report, label = (k: string) => k }: { title: string; report: UsageReport; label?: (key: string) => string }) {
  return (
    <section aria-label={title}>
      <h2>{title}</h2>
      {report.data.length === 0 ? (
        <p className="muted">Nothing in this period.</p>
      ) : (
        <div className="table-wrap">
        <table>
          <thead>
            <tr>
              <th scope="col">{headerOf(title)}</th>
              <th scope="col">Prompt</th>
              <th scope="col">Completion</th>
              <th scope="col">Total</th>
              <th scope="col">Calls</th>
            </tr>
          </thead>
          <tbody>
            {report.data.map((r) => (
              <tr key={r.key}>
                <td>{label(r.key)}</td>
                <td>{fmt(r.promptTokens)}</td>
                <td>{fmt(r.completionTokens)}</td>
                <td>{fmt(r.totalTokens)}</td>
                <td>{fmt(r.requests)}</td>
              </tr>
            ))}
          </tbody>
        </table>
        </div>
      )}
    </section>
  );
}
