import type { Page } from '@agentry/client';
import { api, qs } from '../lib/api';
import { useLoad } from '../lib/hooks';
import { Link } from '../lib/router';

/**
 * The newcomer's path on an empty server, one step a line, each ticked once done: a model
 * provider, an agent, a first conversation. Shown until all three are done; then nothing.
 * A viewer who may not read the providers (a user on a closed server) sees that step as done:
 * it is an admin's to take, and the next steps say what fails if it is missing.
 */
export function FirstSteps({ agents }: { agents: number }) {
  const state = useLoad(async () => {
    const [providers, sessions] = await Promise.all([
      api.get<{ providers: unknown[] }>('/config/models').then(
        (m) => m.providers.length > 0,
        () => true,
      ),
      api.get<Page<unknown>>(`/sessions${qs({ nonEmpty: true, page: 1, size: 1 })}`).then(
        (p) => p.total > 0,
        () => false,
      ),
    ]);
    return { providers, sessions };
  }, [agents]);
  if (!state.data) return null;
  const steps = [
    { done: state.data.providers, text: 'Add a model provider', how: <Link to="/providers">Model providers</Link>, hint: 'an OpenAI-compatible URL and key; the first becomes the default' },
    { done: agents > 0, text: 'Create an agent', how: <Link to="/agents/new">New agent</Link>, hint: 'the template is ready to save' },
    { done: state.data.sessions, text: 'Chat with it', how: agents > 0 ? <span>type below</span> : null, hint: 'answers stream in as the agent writes them' },
  ];
  if (steps.every((s) => s.done)) return null;
  return (
    <section className="first-steps card" aria-labelledby="first-steps-title">
      <h2 id="first-steps-title">Get started</h2>
      <ol>
        {steps.map((s) => (
          <li key={s.text} data-done={s.done}>
            <span className="first-steps-mark" aria-hidden="true">
              {s.done ? '✓' : '○'}
            </span>
            <span>
              <strong>{s.text}</strong>
              {s.done ? <span className="sr-only"> (done)</span> : null}
              {!s.done && s.how ? <> · {s.how}</> : null}
              <span className="muted"> — {s.hint}</span>
            </span>
          </li>
        ))}
      </ol>
    </section>
  );
}
