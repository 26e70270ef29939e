// The shown run's events. Only the newest rows are rendered (the DOM stays small with
// thousands of events); filters narrow by node and event type; follow mode keeps the newest
// row in sight.

import { memo, useCallback, useEffect, useMemo, useRef, useState } from 'react';
import { labelOf } from '../catalog';
import { useCanvas, useLayout, useRun, useSession, useSessionState } from '../hooks';
import { Splitter } from './Splitter';
import { logRowsOf, type LogRow } from '../runStore';

/** Rows rendered at most; older ones are counted, not drawn. */
export const MAX_LOG_ROWS = 400;
/** Characters of content shown in a collapsed row. */
const PREVIEW_LENGTH = 180;

function timeOf(ts: string): string {
  const date = new Date(ts);
  if (Number.isNaN(date.getTime())) return ts;
  const pad = (n: number, width = 2) => String(n).padStart(width, '0');
  return `${pad(date.getHours())}:${pad(date.getMinutes())}:${pad(date.getSeconds())}.${pad(date.getMilliseconds(), 3)}`;
}

/** Content as a person reads it opened: JSON indented, anything else as written (wrapped). */
export function readable(content: string): string {
  const trimmed = content.trimStart();
  if (trimmed.startsWith('{') || trimmed.startsWith('[')) {
    try {
      return JSON.stringify(JSON.parse(content), null, 2);
    } catch {
      return content;
    }
  }
  return content;
}

/** Content on one line, cut at the preview length. */
function preview(content: string): string {
  const line = content.replace(/\s+/g, ' ');
  return line.length > PREVIEW_LENGTH ? `${line.slice(0, PREVIEW_LENGTH)}…` : line;
}

interface LogRowProps {
  row: LogRow;
  open: boolean;
  name: string;
  onToggle: (row: LogRow) => void;
}

function LogRowView({ row, open, name, onToggle }: LogRowProps) {
  // Long text opens in full; JSON, however short, opens indented.
  const long = row.summary !== null || row.content.length > PREVIEW_LENGTH || row.content.includes('\n') || readable(row.content) !== row.content;
  return (
    <div
      className={`log-row type-${row.type} ${row.status ? `status-${row.status}` : ''} ${row.scope ? 'scoped' : ''} ${open ? 'open' : ''} ${long ? 'expandable' : ''}`}
      data-testid="log-row"
      data-type={row.type}
      data-status={row.status ?? undefined}
      data-node-id={row.nodeId ?? undefined}
      data-seq={row.seq}
      title={long && !open ? 'Click to show all' : undefined}
      onClick={() => long && onToggle(row)}
    >
      <span className="log-seq">{row.seq === row.lastSeq ? row.seq : `${row.seq}–${row.lastSeq}`}</span>
      <span className="log-time">{timeOf(row.ts)}</span>
      <span className="log-type">{row.type}</span>
      <span className="log-node" title={row.nodeId ?? undefined}>
        {name}
      </span>
      {open ? (
        <pre className="log-content full" data-testid="log-content-full">
          {readable(row.content)}
        </pre>
      ) : (
        <span className="log-content">
          {preview(row.summary ?? row.content)}
        </span>
      )}
    </div>
  );
}

// Rows are rebuilt from the events on every batch; a row is drawn again only when what it
// shows changed (a streaming row grows, a row opens), so a long log stays cheap to update.
const MemoLogRow = memo(
  LogRowView,
  (before, after) =>
    before.row.key === after.row.key &&
    before.row.lastSeq === after.row.lastSeq &&
    before.open === after.open &&
    before.name === after.name &&
    before.onToggle === after.onToggle,
);

export function LogPanel() {
  const session = useSession();
  const collapsed = useLayout((layout) => layout.logCollapsed);
  const height = useLayout((layout) => layout.logHeight);
  const events = useRun((view) => view.events);
  const runId = useRun((view) => view.runId);
  const viewing = useSessionState((state) => state.viewing);
  const editedFlow = useCanvas((state) => state.flow);
  const flow = viewing?.flow ?? editedFlow;
  const [nodeFilter, setNodeFilter] = useState('');
  const [typeFilter, setTypeFilter] = useState('');
  const [follow, setFollow] = useState(true);
  const [expanded, setExpanded] = useState<ReadonlySet<string>>(new Set());
  const list = useRef<HTMLDivElement>(null);

  const rows = useMemo(() => logRowsOf(events), [events]);
  const types = useMemo(() => [...new Set(events.map((event) => event.type))].sort(), [events]);
  const labels = useMemo(() => new Map(flow.nodes.map((node) => [node.id, labelOf(node)])), [flow]);
  const filtered = useMemo(
    () =>
      rows.filter(
        (row) => (nodeFilter === '' || row.nodeId === nodeFilter) && (typeFilter === '' || row.type === typeFilter),
      ),
    [rows, nodeFilter, typeFilter],
  );
  const shown = filtered.length > MAX_LOG_ROWS ? filtered.slice(-MAX_LOG_ROWS) : filtered;
  const hidden = filtered.length - shown.length;
  const newest = shown[shown.length - 1];

  useEffect(() => {
    if (follow && list.current) list.current.scrollTop = list.current.scrollHeight;
  }, [follow, newest?.key, newest?.content.length]);

  const toggle = useCallback(
    (row: LogRow) =>
      setExpanded((current) => {
        const next = new Set(current);
        if (next.has(row.key)) next.delete(row.key);
        else next.add(row.key);
        return next;
      }),
    [],
  );

  const nodeName = (row: LogRow) => {
    if (!row.nodeId) return '';
    // A nested run's node belongs to another flow: named by its path, not a label here.
    if (row.scope) return `${row.scope}/${row.nodeId}${row.item !== null ? ` [${row.item}]` : ''}`;
    return labels.get(row.nodeId) ?? row.nodeId;
  };

  return (
    <section
      className={`log ${collapsed ? 'collapsed' : ''}`}
      data-testid="log"
      data-run-id={runId ?? undefined}
      data-collapsed={collapsed ? 'true' : 'false'}
      style={collapsed ? undefined : { height }}
    >
      {!collapsed && (
        <Splitter
          testId="log-splitter"
          direction="rows"
          size={height}
          sign={-1}
          label="Drag to make the log taller or shorter"
          onResize={(logHeight) => session.layout.set({ logHeight })}
        />
      )}
      <div className="log-toolbar">
        <button
          type="button"
          className="icon-button"
          data-testid="log-toggle"
          title={collapsed ? 'Show the log' : 'Hide the log'}
          onClick={() => session.layout.set({ logCollapsed: !collapsed })}
        >
          {collapsed ? '▸' : '▾'}
        </button>
        <span className="panel-title">Log</span>
        <select className="input small" data-testid="log-filter-node" aria-label="Show the events of" value={nodeFilter} onChange={(event) => setNodeFilter(event.target.value)}>
          <option value="">All nodes</option>
          {flow.nodes.map((node) => (
            <option key={node.id} value={node.id}>
              {labelOf(node)}
            </option>
          ))}
        </select>
        <select className="input small" data-testid="log-filter-type" aria-label="Show the events of type" value={typeFilter} onChange={(event) => setTypeFilter(event.target.value)}>
          <option value="">All events</option>
          {types.map((type) => (
            <option key={type} value={type}>
              {type}
            </option>
          ))}
        </select>
        <label className="checkbox-label">
          <input type="checkbox" data-testid="log-follow" checked={follow} onChange={(event) => setFollow(event.target.checked)} />
          Follow
        </label>
        <span className="muted log-count" data-testid="log-count">
          {events.length} events
        </span>
      </div>
      {!collapsed && (
      <div className="log-rows" ref={list}>
        {hidden > 0 && <div className="log-hidden muted">{hidden} earlier rows not shown (filter to see them)</div>}
        {events.length === 0 && <div className="muted log-empty">Run the flow to see its events here.</div>}
        {shown.map((row) => (
          <MemoLogRow key={row.key} row={row} open={expanded.has(row.key)} name={nodeName(row)} onToggle={toggle} />
        ))}
      </div>
      )}
    </section>
  );
}
