import { useMemo, useState } from 'react';
import type { ToolForms } from '@agentry/client';
import { FAMILIES, familyOf } from '../lib/node-families';

/**
 * The canvas's node palette: every node type of `GET /tools/forms` with its one-line description,
 * grouped by family (AI, filters, routing, transforms, flow control, actions), a search box over
 * type, description and family. A type is dragged onto the canvas (dropped on a connection it is
 * put in between) or added with a click or Enter (right of the other nodes).
 */

/** What a palette drag carries (the node type) in its DataTransfer. */
export const NODE_DRAG_TYPE = 'application/x-agentry-node-type';

/** The first sentence of a description, for the one line under the type. */
function firstLine(text: string): string {
  const m = /^.*?[.!?;:](?=\s|$)/s.exec(text.trim());
  return (m ? m[0] : text).replace(/\s+/g, ' ').replace(/[.;:]$/, '');
}

export function NodePalette({ forms, onAdd }: { forms: ToolForms; onAdd: (type: string) => void }) {
  const [query, setQuery] = useState('');
  const groups = useMemo(() => {
    const words = query.trim().toLowerCase().split(/\s+/).filter(Boolean);
    const shown = forms.nodes.filter((n) => {
      const text = `${n.type} ${n.description} ${familyOf(n.type)}`.toLowerCase();
      return words.every((w) => text.includes(w));
    });
    return FAMILIES.map((f) => ({ family: f, nodes: shown.filter((n) => familyOf(n.type) === f) })).filter((g) => g.nodes.length > 0);
  }, [forms, query]);
  return (
    <aside className="node-palette" aria-label="Node palette">
      <div className="field">
        <label htmlFor="node-palette-search">Search nodes</label>
        <input id="node-palette-search" type="search" value={query} onChange={(e) => setQuery(e.target.value)} placeholder="filter, http, switch…" spellCheck={false} />
      </div>
      <p className="hint">Drag onto the canvas (onto a connection to put it in between), or click to add.</p>
      {groups.length === 0 ? <p className="muted">No node type matches “{query}”.</p> : null}
      {groups.map((g) => (
        <section key={g.family} className="palette-group" aria-label={g.family}>
          <h4>{g.family}</h4>
          <ul className="stack-list">
            {g.nodes.map((n) => (
              <li key={n.type}>
                <button
                  type="button"
                  className="palette-item"
                  draggable
                  aria-label={`Add ${n.type} node`}
                  title={n.description}
                  data-node-type={n.type}
                  onDragStart={(e) => {
                    e.dataTransfer.setData(NODE_DRAG_TYPE, n.type);
                    e.dataTransfer.effectAllowed = 'copy';
                  }}
                  onClick={() => onAdd(n.type)}
                >
                  <strong>{n.type}</strong>
                  <span className="palette-desc">{firstLine(n.description)}</span>
                </button>
              </li>
            ))}
          </ul>
        </section>
      ))}
    </aside>
  );
}
