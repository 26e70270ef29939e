// MCP servers and their tools on the canvas: the flow panel's servers (`settings.mcpServers`)
// with Test connection, the list of what each server offers, and the agent inspector's tool
// picker for `tools.mcp` and `approveTools`, fed by the listed tools.

import { useEffect, useState } from 'react';
import type { McpServerTools, Value } from '../bindings';
import { useCanvas, useSession, useSessionState } from '../hooks';
import type { EditorProps } from './editorProps';

/** Each server with its tools, or why it could not be listed. */
export function McpServerList({ servers, testId }: { servers: McpServerTools[]; testId: string }) {
  if (servers.length === 0) return <p className="muted" data-testid={testId}>No MCP servers.</p>;
  return (
    <ul className="mcp-servers" data-testid={testId}>
      {servers.map((server) => (
        <li key={server.name} className="mcp-server" data-testid="mcp-server" data-server={server.name} data-ok={server.error === null ? 'true' : 'false'}>
          <div>
            <strong>{server.name}</strong>{' '}
            <span className="muted">
              {server.transport}
              {server.fromSettings ? ' · from Settings' : ''}
            </span>
          </div>
          {server.error !== null ? (
            <div className="connection-result error" data-testid="mcp-server-error">
              {server.error}
            </div>
          ) : (
            <ul className="mcp-tool-list">
              {server.tools.map((tool) => (
                <li key={tool.name} data-testid="mcp-tool" title={tool.description}>
                  <code>{tool.name}</code> <span className="muted">{firstSentence(tool.description)}</span>
                </li>
              ))}
            </ul>
          )}
        </li>
      ))}
    </ul>
  );
}

function firstSentence(text: string): string {
  const line = text.split('\n')[0] ?? '';
  return line.length > 90 ? `${line.slice(0, 90)}…` : line;
}

const SERVERS_EXAMPLE = 'None. For example: {"files": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-filesystem", "."]}}';

/**
 * The flow's MCP servers (`settings.mcpServers`) as JSON, applied when the text is valid JSON
 * (one undoable edit; the validator names what a definition lacks), and Test connection, which
 * lists the tools of these servers and of those Settings add.
 */
export function FlowMcpServers({ readOnly }: { readOnly: boolean }) {
  const session = useSession();
  const stored = useCanvas((state) => state.flow.settings?.mcpServers);
  const tools = useSessionState((state) => state.mcpTools);
  const loading = useSessionState((state) => state.mcpToolsLoading);
  const problem = useSessionState((state) => state.mcpToolsProblem);
  const storedText = stored === undefined ? '' : JSON.stringify(stored, null, 2);
  const [draft, setDraft] = useState(storedText);
  const [syntax, setSyntax] = useState<string | null>(null);
  // Undo, or another edit, changes the stored servers: the text follows unless it means them.
  useEffect(() => {
    setDraft((current) => (sameJson(current, stored) ? current : storedText));
  }, [storedText]); // eslint-disable-line react-hooks/exhaustive-deps

  const apply = (text: string) => {
    setDraft(text);
    if (text.trim() === '') {
      setSyntax(null);
      session.canvas.setFlowSetting('mcpServers', undefined);
      return;
    }
    try {
      const value = JSON.parse(text) as Value;
      setSyntax(null);
      session.canvas.setFlowSetting('mcpServers', value);
    } catch (error) {
      setSyntax(`Not JSON yet: ${(error as Error).message}`);
    }
  };

  return (
    <section className="flow-mcp" data-testid="flow-mcp">
      <label className="field-label" htmlFor="flow-mcp-servers">
        MCP servers
      </label>
      {/* Empty, the box holds the whole example and does not scroll: a box that scrolls, even
          for its placeholder, shows a scrollbar that WebKit goes on redrawing for seconds, which
          without a GPU took most of the CPU of the app's first seconds. */}
      <textarea
        id="flow-mcp-servers"
        className={draft === '' ? 'input mono placeholder-only' : 'input mono'}
        data-testid="flow-mcp-servers"
        rows={draft === '' ? 4 : Math.min(12, Math.max(4, draft.split('\n').length))}
        value={draft}
        placeholder={SERVERS_EXAMPLE}
        spellCheck={false}
        readOnly={readOnly}
        onChange={(event) => apply(event.target.value)}
      />
      {syntax && (
        <div className="field-error" data-testid="flow-mcp-syntax">
          {syntax}
        </div>
      )}
      <div className="field-help">
        Servers this flow's agents may use as tools: <code>command</code>/<code>args</code>/<code>cwd</code>/<code>env</code> for a
        program, or <code>url</code>/<code>headers</code>. Write secrets as <code>{'${NAME}'}</code>: read when the run starts, from
        Settings → Variables or the environment, never kept in the flow.
      </div>
      <div className="button-row">
        <button
          type="button"
          className="button small"
          data-testid="flow-mcp-test"
          disabled={loading || syntax !== null}
          onClick={() => void session.loadMcpTools()}
        >
          {loading ? 'Connecting…' : 'Test connection'}
        </button>
      </div>
      {problem && (
        <div className="connection-result error" data-testid="flow-mcp-problem">
          {problem}
        </div>
      )}
      {tools && <McpServerList servers={tools} testId="flow-mcp-tools" />}
    </section>
  );
}

function sameJson(text: string, value: Value | undefined): boolean {
  if (text.trim() === '') return value === undefined;
  try {
    return JSON.stringify(JSON.parse(text)) === JSON.stringify(value);
  } catch {
    return false;
  }
}

/** What the picker edits: the tools an agent may call, or those a person approves first. */
type PickerMode = 'use' | 'approve';

/** The entry that stands for every tool of `server`. */
function allOf(server: string, mode: PickerMode): string {
  return mode === 'use' ? server : `${server}/*`;
}

function entriesOf(value: Value | undefined): string[] {
  return Array.isArray(value) ? value.filter((entry): entry is string => typeof entry === 'string') : [];
}

/**
 * `tools.mcp` or `approveTools` as checkboxes: each listed server with "all its tools" and each
 * tool; entries no listed tool stands for (a server not reachable now) stay as removable rows,
 * and any entry can still be typed.
 */
export function McpToolPicker({ field, value, onChange, readOnly, mode }: EditorProps & { mode: PickerMode }) {
  const session = useSession();
  const servers = useSessionState((state) => state.mcpTools);
  const loading = useSessionState((state) => state.mcpToolsLoading);
  const problem = useSessionState((state) => state.mcpToolsProblem);
  const hasServers = useCanvas((state) => state.flow.settings?.mcpServers !== undefined);
  const [typed, setTyped] = useState('');
  const entries = entriesOf(value);
  const write = (next: string[]) => onChange(next.length === 0 ? undefined : next);
  const toggle = (entry: string, on: boolean, server: string) => {
    if (!on) return write(entries.filter((candidate) => candidate !== entry));
    // "All its tools" replaces the server's single entries.
    const kept = entry === allOf(server, mode) ? entries.filter((candidate) => !candidate.startsWith(`${server}/`)) : entries;
    write([...kept, entry]);
  };

  useEffect(() => {
    if (servers === null && !loading && problem === null && (hasServers || entries.length > 0)) void session.loadMcpTools();
    // Listed once when first shown; ↻ lists again.
  }, []); // eslint-disable-line react-hooks/exhaustive-deps

  const listed = new Set<string>();
  for (const server of servers ?? []) {
    listed.add(allOf(server.name, mode));
    for (const tool of server.tools) listed.add(`${server.name}/${tool.name}`);
  }
  const others = entries.filter((entry) => !listed.has(entry));

  return (
    <div className="rows-editor mcp-picker" data-testid={`field-${field.name}`}>
      {(servers ?? [])
        .filter((server) => server.error === null)
        .map((server) => {
          const all = allOf(server.name, mode);
          const everything = entries.includes(all);
          return (
            <fieldset key={server.name} className="mcp-picker-server" data-server={server.name}>
              <legend>{server.name}</legend>
              <label className="checkbox-label">
                <input
                  type="checkbox"
                  data-testid="mcp-pick"
                  data-entry={all}
                  checked={everything}
                  disabled={readOnly}
                  onChange={(event) => toggle(all, event.target.checked, server.name)}
                />
                {mode === 'use' ? 'all its tools' : 'every tool'}
              </label>
              {server.tools.map((tool) => {
                const entry = `${server.name}/${tool.name}`;
                return (
                  <label key={entry} className="checkbox-label" title={tool.description}>
                    <input
                      type="checkbox"
                      data-testid="mcp-pick"
                      data-entry={entry}
                      checked={everything || entries.includes(entry)}
                      disabled={readOnly || everything}
                      onChange={(event) => toggle(entry, event.target.checked, server.name)}
                    />
                    <code>{tool.name}</code>
                  </label>
                );
              })}
            </fieldset>
          );
        })}
      {(servers ?? [])
        .filter((server) => server.error !== null)
        .map((server) => (
          <div key={server.name} className="field-help" data-testid="mcp-picker-unreachable">
            {server.name}: {server.error}
          </div>
        ))}
      {problem && <div className="field-error">{problem}</div>}
      {others.map((entry) => (
        <div className="list-row" key={entry} data-testid="mcp-entry">
          <code className="mcp-entry">{entry}</code>
          <button
            type="button"
            className="icon-button"
            title={`Remove ${entry}`}
            aria-label={`Remove ${entry}`}
            disabled={readOnly}
            onClick={() => write(entries.filter((candidate) => candidate !== entry))}
          >
            ×
          </button>
        </div>
      ))}
      <div className="list-row">
        <input
          className="input mono"
          data-testid={`field-${field.name}-typed`}
          aria-label={`Add to ${field.label}`}
          placeholder={mode === 'use' ? 'server or server/tool' : 'server/tool, server/* or *'}
          value={typed}
          readOnly={readOnly}
          onChange={(event) => setTyped(event.target.value)}
          onKeyDown={(event) => {
            if (event.key === 'Enter' && typed.trim() !== '') {
              if (!entries.includes(typed.trim())) write([...entries, typed.trim()]);
              setTyped('');
            }
          }}
        />
        <button
          type="button"
          className="button small"
          data-testid={`field-${field.name}-list`}
          title="Connect to the flow's MCP servers and list their tools"
          disabled={loading}
          onClick={() => void session.loadMcpTools()}
        >
          {loading ? 'Listing…' : servers === null ? 'List tools' : '↻ List again'}
        </button>
      </div>
    </div>
  );
}
