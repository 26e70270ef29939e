// Provider keys and addresses, the default model, MCP servers for every flow and the variables
// their `${NAME}`s read. A key or a variable's value is never shown back: the panel only says
// whether one is set and where it comes from.

import { useEffect, useState } from 'react';
import type { McpServerTools, ProviderKind, ProviderSettingsView, ServerCheck, SettingsChange, SettingsView } from '../bindings';
import { errorMessage } from '../errors';
import { useLayout, useSession } from '../hooks';
import type { Theme } from '../layout';
import { McpServerList } from './McpTools';

/** A change of the settings named in `change`, leaving every other one as it is. */
function changeOf(change: Partial<SettingsChange>): SettingsChange {
  return {
    provider: null,
    key: null,
    address: null,
    defaultModel: null,
    userName: null,
    prices: null,
    mcpServers: null,
    people: null,
    variable: null,
    server: null,
    ...change,
  };
}

function keyPlaceholder(provider: ProviderSettingsView): string {
  if (provider.keyFromEnvironment) return 'from environment';
  return provider.keySet ? 'set' : 'not set';
}

function ProviderSettings({ provider, onSaved }: { provider: ProviderSettingsView; onSaved: (view: SettingsView) => void }) {
  const session = useSession();
  const name: ProviderKind = provider.provider;
  const [key, setKey] = useState('');
  const [address, setAddress] = useState(provider.address);
  const [result, setResult] = useState<{ ok: boolean; text: string } | null>(null);
  const [testing, setTesting] = useState(false);

  useEffect(() => setAddress(provider.address), [provider.address]);

  const save = async () => {
    try {
      const view = await session.api.saveSettings(changeOf({ provider: name, key: key === '' ? null : key, address }));
      setKey('');
      onSaved(view);
    } catch (error) {
      session.reportError(error);
    }
  };

  const test = async () => {
    setTesting(true);
    setResult(null);
    try {
      const report = await session.api.testConnection(name);
      const models = report.models.length > 0 ? ` (${report.models.join(', ')})` : '';
      setResult({ ok: true, text: `Connected: ${report.models.length} models${models}` });
    } catch (error) {
      setResult({ ok: false, text: errorMessage(error) });
    } finally {
      setTesting(false);
    }
  };

  return (
    <section className="provider" data-testid={`settings-${name}`}>
      <h3 className="section-title">{name}</h3>
      {provider.keyVariable && (
        <label className="field">
          <span className="field-label">API key</span>
          <input
            type="password"
            className="input"
            data-testid={`settings-key-${name}`}
            value={key}
            placeholder={keyPlaceholder(provider)}
            autoComplete="off"
            onChange={(event) => setKey(event.target.value)}
          />
          <span className="field-help">
            Environment variable {provider.keyVariable}. Leave empty to keep the key as it is.
          </span>
        </label>
      )}
      <label className="field">
        <span className="field-label">Address</span>
        <input
          type="text"
          className="input mono"
          data-testid={`settings-address-${name}`}
          value={address}
          placeholder={provider.effectiveAddress}
          spellCheck={false}
          onChange={(event) => setAddress(event.target.value)}
        />
        <span className="field-help">Environment variable {provider.addressVariable}. Empty uses the default.</span>
      </label>
      <div className="button-row">
        <button type="button" className="button primary small" data-testid={`settings-save-${name}`} onClick={() => void save()}>
          Save
        </button>
        <button type="button" className="button small" data-testid={`test-connection-${name}`} disabled={testing} onClick={() => void test()}>
          {testing ? 'Testing…' : 'Test connection'}
        </button>
      </div>
      {result && (
        <div className={`connection-result ${result.ok ? 'ok' : 'error'}`} data-testid={`connection-result-${name}`}>
          {result.text}
        </div>
      )}
    </section>
  );
}

const PRICES_EXAMPLE = '{\n  "openai/gpt-4o": { "input": 2.5, "output": 10 }\n}';

/**
 * Prices that add to or replace the shipped ones (US dollars per million tokens, by
 * `provider/model`), checked by the engine when saved: a wrong table is refused naming its line
 * or model, and the table before stays.
 */
function PriceSettings({ view, onSaved }: { view: SettingsView; onSaved: (view: SettingsView) => void }) {
  const session = useSession();
  const [prices, setPrices] = useState(view.prices);
  const [problem, setProblem] = useState<string | null>(null);
  useEffect(() => setPrices(view.prices), [view.prices]);
  const save = async () => {
    try {
      const settings = await session.api.saveSettings(changeOf({ prices }));
      setProblem(null);
      onSaved(settings);
    } catch (error) {
      setProblem(errorMessage(error));
    }
  };
  return (
    <section className="provider" data-testid="settings-prices-section">
      <h3 className="section-title">Prices</h3>
      <textarea
        className="input mono"
        data-testid="settings-prices"
        rows={5}
        value={prices}
        placeholder={PRICES_EXAMPLE}
        spellCheck={false}
        onChange={(event) => setPrices(event.target.value)}
      />
      {problem && (
        <div className="field-error" data-testid="settings-prices-error">
          {problem}
        </div>
      )}
      <div className="button-row">
        <button type="button" className="button primary small" data-testid="settings-save-prices" onClick={() => void save()}>
          Save
        </button>
      </div>
      <span className="field-help">
        US dollars per million tokens, by provider/model; they add to or replace the shipped prices (and those of the
        file WEFT_PRICES names). A model with no price shows tokens and no cost.
      </span>
    </section>
  );
}

const PEOPLE_EXAMPLE = '# name  email              groups\nada     ada@example.com    finance\ngrace   grace@example.com  finance ops';

/**
 * Who may decide approvals that name approvers or groups (`approvers: ["group:finance"]`), in
 * the form of a people file; refused with the line that does not parse.
 */
function PeopleSettings({ view, onSaved }: { view: SettingsView; onSaved: (view: SettingsView) => void }) {
  const session = useSession();
  const [people, setPeople] = useState(view.people);
  const [problem, setProblem] = useState<string | null>(null);
  useEffect(() => setPeople(view.people), [view.people]);
  const save = async () => {
    try {
      const settings = await session.api.saveSettings(changeOf({ people }));
      setProblem(null);
      onSaved(settings);
    } catch (error) {
      setProblem(errorMessage(error));
    }
  };
  return (
    <section className="provider" data-testid="settings-people-section">
      <h3 className="section-title">People</h3>
      <textarea
        className="input mono"
        data-testid="settings-people"
        aria-label="People who decide approvals, one a line: name, email, groups"
        rows={4}
        value={people}
        placeholder={PEOPLE_EXAMPLE}
        spellCheck={false}
        onChange={(event) => setPeople(event.target.value)}
      />
      {problem && (
        <div className="field-error" data-testid="settings-people-error">
          {problem}
        </div>
      )}
      <div className="button-row">
        <button type="button" className="button primary small" data-testid="settings-save-people" onClick={() => void save()}>
          Save
        </button>
      </div>
      <span className="field-help">
        One person a line: name, email (- for none), groups. An approval&apos;s approvers name people and group:NAME; empty here,
        the file WEFT_PEOPLE_FILE names is used.
      </span>
    </section>
  );
}

const APP_SERVERS_EXAMPLE = '{\n  "tracker": { "url": "https://tracker.example/mcp", "headers": { "Authorization": "Bearer ${TRACKER_TOKEN}" } }\n}';

/**
 * MCP servers every flow may use (a flow's own server of the same name wins), checked when
 * saved like a flow's, and Test connection listing their tools.
 */
function McpSettings({ view, onSaved }: { view: SettingsView; onSaved: (view: SettingsView) => void }) {
  const session = useSession();
  const [servers, setServers] = useState(view.mcpServers);
  const [problem, setProblem] = useState<string | null>(null);
  const [listed, setListed] = useState<McpServerTools[] | null>(null);
  const [testing, setTesting] = useState(false);
  useEffect(() => setServers(view.mcpServers), [view.mcpServers]);
  const save = async () => {
    try {
      const settings = await session.api.saveSettings(changeOf({ mcpServers: servers }));
      setProblem(null);
      onSaved(settings);
    } catch (error) {
      setProblem(errorMessage(error));
    }
  };
  const test = async () => {
    setTesting(true);
    try {
      setListed(await session.api.listMcpTools(null, null));
      setProblem(null);
    } catch (error) {
      setProblem(errorMessage(error));
    } finally {
      setTesting(false);
    }
  };
  return (
    <section className="provider" data-testid="settings-mcp-section">
      <h3 className="section-title">MCP servers for every flow</h3>
      <textarea
        className="input mono"
        data-testid="settings-mcp-servers"
        aria-label="MCP servers for every flow, as JSON"
        rows={5}
        value={servers}
        placeholder={APP_SERVERS_EXAMPLE}
        spellCheck={false}
        onChange={(event) => setServers(event.target.value)}
      />
      {problem && (
        <div className="field-error" data-testid="settings-mcp-error">
          {problem}
        </div>
      )}
      <div className="button-row">
        <button type="button" className="button primary small" data-testid="settings-save-mcp" onClick={() => void save()}>
          Save
        </button>
        <button type="button" className="button small" data-testid="settings-test-mcp" disabled={testing} onClick={() => void test()}>
          {testing ? 'Connecting…' : 'Test connection'}
        </button>
      </div>
      <span className="field-help">
        The form of a flow's settings.mcpServers. Agents of any flow opened here may use them; a flow's own server of the same
        name wins. `weft` on the command line knows only the flow's own.
      </span>
      {listed && <McpServerList servers={listed} testId="settings-mcp-tools" />}
    </section>
  );
}

/** Values MCP server definitions read as `${NAME}` (tokens, folders), kept in the settings file only. */
function VariableSettings({ view, onSaved }: { view: SettingsView; onSaved: (view: SettingsView) => void }) {
  const session = useSession();
  const [name, setName] = useState('');
  const [value, setValue] = useState('');
  const [problem, setProblem] = useState<string | null>(null);
  const change = async (variable: { name: string; value: string }) => {
    try {
      onSaved(await session.api.saveSettings(changeOf({ variable })));
      setProblem(null);
      return true;
    } catch (error) {
      setProblem(errorMessage(error));
      return false;
    }
  };
  return (
    <section className="provider" data-testid="settings-variables">
      <h3 className="section-title">Variables</h3>
      {view.variables.length > 0 && (
        <ul className="variable-list">
          {view.variables.map((variable) => (
            <li key={variable} className="list-row" data-testid="settings-variable" data-name={variable}>
              <code>{variable}</code>
              <span className="muted">set</span>
              <button
                type="button"
                className="icon-button"
                title={`Remove ${variable}`}
                aria-label={`Remove ${variable}`}
                onClick={() => void change({ name: variable, value: '' })}
              >
                ×
              </button>
            </li>
          ))}
        </ul>
      )}
      <div className="button-row">
        <input
          className="input mono"
          data-testid="settings-variable-name"
          aria-label="Variable name"
          placeholder="NAME"
          value={name}
          spellCheck={false}
          onChange={(event) => setName(event.target.value)}
        />
        <input
          type="password"
          className="input"
          data-testid="settings-variable-value"
          aria-label="Variable value"
          placeholder="value"
          autoComplete="off"
          value={value}
          onChange={(event) => setValue(event.target.value)}
        />
        <button
          type="button"
          className="button primary small"
          data-testid="settings-save-variable"
          disabled={name.trim() === '' || value === ''}
          onClick={() =>
            void change({ name, value }).then((saved) => {
              if (saved) {
                setName('');
                setValue('');
              }
            })
          }
        >
          Set
        </button>
      </div>
      {problem && (
        <div className="field-error" data-testid="settings-variable-error">
          {problem}
        </div>
      )}
      <span className="field-help">
        Read by MCP servers' env and headers as {'${NAME}'} when a server starts (before the environment's). Values stay in the
        settings file (readable by you only) and are never shown, logged or stored with a run.
      </span>
    </section>
  );
}

/**
 * The `weft serve`s this app connects to: a name, an address and a token each (the token kept
 * like a provider key, never shown back), and a connection check that says what is wrong.
 */
function ServerSettings({ view, onSaved }: { view: SettingsView; onSaved: (view: SettingsView) => void }) {
  const session = useSession();
  const [name, setName] = useState('');
  const [url, setUrl] = useState('');
  const [token, setToken] = useState('');
  const [problem, setProblem] = useState<string | null>(null);
  const [checks, setChecks] = useState<Record<string, ServerCheck | 'checking'>>({});
  const change = async (server: { name: string; url: string; token: string; remove: boolean }) => {
    try {
      onSaved(await session.api.saveSettings(changeOf({ server })));
      setProblem(null);
      return true;
    } catch (error) {
      setProblem(errorMessage(error));
      return false;
    }
  };
  const checkServer = async (server: string) => {
    setChecks((shown) => ({ ...shown, [server]: 'checking' }));
    try {
      const found = await session.api.checkServer(server);
      setChecks((shown) => ({ ...shown, [server]: found }));
    } catch (error) {
      setChecks((shown) => ({ ...shown, [server]: { ok: false, message: errorMessage(error) } }));
    }
  };
  return (
    <section className="provider" data-testid="settings-servers">
      <h3 className="section-title">Servers</h3>
      {view.servers.length > 0 && (
        <ul className="variable-list">
          {view.servers.map((server) => {
            const check = checks[server.name];
            return (
              <li key={server.name} className="server-row" data-testid="settings-server" data-name={server.name}>
                <strong>{server.name}</strong>
                <code>{server.url}</code>
                <span className="muted">{server.tokenSet ? 'token set' : 'no token'}</span>
                <button
                  type="button"
                  className="button small"
                  data-testid="settings-check-server"
                  disabled={check === 'checking'}
                  onClick={() => void checkServer(server.name)}
                >
                  {check === 'checking' ? 'Checking…' : 'Check connection'}
                </button>
                <button
                  type="button"
                  className="icon-button"
                  title={`Remove ${server.name}`}
                  aria-label={`Remove ${server.name}`}
                  onClick={() => void change({ name: server.name, url: '', token: '', remove: true })}
                >
                  ×
                </button>
                {check && check !== 'checking' && (
                  <div
                    className={`server-check ${check.ok ? 'muted' : 'field-error'}`}
                    data-testid="settings-server-check"
                    data-ok={String(check.ok)}
                  >
                    {check.message}
                  </div>
                )}
              </li>
            );
          })}
        </ul>
      )}
      <div className="button-row">
        <input
          className="input mono"
          data-testid="settings-server-name"
          aria-label="Server name"
          placeholder="name"
          value={name}
          spellCheck={false}
          onChange={(event) => setName(event.target.value)}
        />
        <input
          className="input mono"
          data-testid="settings-server-url"
          aria-label="Server address"
          placeholder="http://127.0.0.1:8420"
          value={url}
          spellCheck={false}
          onChange={(event) => setUrl(event.target.value)}
        />
        <input
          type="password"
          className="input"
          data-testid="settings-server-token"
          aria-label="Server token"
          placeholder="token"
          autoComplete="off"
          value={token}
          onChange={(event) => setToken(event.target.value)}
        />
        <button
          type="button"
          className="button primary small"
          data-testid="settings-save-server"
          disabled={name.trim() === '' || url.trim() === ''}
          onClick={() =>
            void change({ name, url, token, remove: false }).then((saved) => {
              if (saved) {
                setName('');
                setUrl('');
                setToken('');
              }
            })
          }
        >
          Save
        </button>
      </div>
      {problem && (
        <div className="field-error" data-testid="settings-server-error">
          {problem}
        </div>
      )}
      <span className="field-help">
        A <code>weft serve</code> of your team: its address and one of its tokens (kept in the settings file, readable by you only,
        never shown or stored with a flow). Saving a server again with an empty token keeps its token.
      </span>
    </section>
  );
}

/** Light, dark, or as the system says (kept with the window's layout). */
function ThemeSettings() {
  const session = useSession();
  const theme = useLayout((layout) => layout.theme);
  return (
    <section className="provider">
      <h3 className="section-title" id="settings-theme-title">
        Theme
      </h3>
      <select
        className="input"
        data-testid="settings-theme"
        aria-labelledby="settings-theme-title"
        value={theme}
        onChange={(event) => session.layout.set({ theme: event.target.value as Theme })}
      >
        <option value="system">As the system</option>
        <option value="light">Light</option>
        <option value="dark">Dark</option>
      </select>
    </section>
  );
}

/** The name kept with each decision taken in this app. */
function UserNameSettings({ view, onSaved }: { view: SettingsView; onSaved: (view: SettingsView) => void }) {
  const session = useSession();
  const [name, setName] = useState(view.userName);
  useEffect(() => setName(view.userName), [view.userName]);
  const save = async () => {
    try {
      onSaved(await session.api.saveSettings(changeOf({ userName: name })));
    } catch (error) {
      session.reportError(error);
    }
  };
  return (
    <section className="provider">
      <h3 className="section-title">Your name</h3>
      <div className="button-row">
        <input className="input" data-testid="settings-user-name" value={name} placeholder="kept with each decision you take" onChange={(event) => setName(event.target.value)} />
        <button type="button" className="button primary small" data-testid="settings-save-user-name" onClick={() => void save()}>
          Save
        </button>
      </div>
      <span className="field-help">Recorded as who approved or rejected (else WEFT_USER, else your login name).</span>
    </section>
  );
}

export function SettingsPanel() {
  const session = useSession();
  const [view, setView] = useState<SettingsView | null>(null);
  const [model, setModel] = useState('');

  useEffect(() => {
    let live = true;
    session.api.getSettings().then(
      (settings) => {
        if (!live) return;
        setView(settings);
        setModel(settings.defaultModel);
      },
      (error) => session.reportError(error),
    );
    return () => {
      live = false;
    };
  }, [session]);

  const saveModel = async () => {
    try {
      const settings = await session.api.saveSettings(changeOf({ defaultModel: model }));
      setView(settings);
      setModel(settings.defaultModel);
      // Agents with no model of their own may be runnable now (or no longer).
      void session.validateNow();
    } catch (error) {
      session.reportError(error);
    }
  };

  const pricesSaved = (settings: SettingsView) => {
    setView(settings);
    // Costs shown are priced again with the new table.
    void session.refreshVisits();
    void session.refreshHistory();
  };

  const saved = (settings: SettingsView) => {
    setView(settings);
    // Providers now configured no longer warn.
    void session.validateNow();
  };

  if (!view) return <div className="settings muted" data-testid="settings">Loading settings…</div>;
  return (
    <div className="settings" data-testid="settings">
      <section className="provider">
        <h3 className="section-title">Default model</h3>
        <div className="button-row">
          <input
            className="input mono"
            data-testid="settings-default-model"
            value={model}
            placeholder="e.g. gpt-4o-mini or ollama/llama3.2"
            onChange={(event) => setModel(event.target.value)}
          />
          <button type="button" className="button primary small" data-testid="settings-save-default-model" onClick={() => void saveModel()}>
            Save
          </button>
        </div>
        <span className="field-help">Used by agents that name no model.</span>
      </section>
      {view.providers.map((provider) => (
        <ProviderSettings key={provider.provider} provider={provider} onSaved={saved} />
      ))}
      <ThemeSettings />
      <UserNameSettings view={view} onSaved={setView} />
      <PriceSettings view={view} onSaved={pricesSaved} />
      <McpSettings view={view} onSaved={saved} />
      <PeopleSettings view={view} onSaved={saved} />
      <VariableSettings view={view} onSaved={setView} />
      <ServerSettings view={view} onSaved={setView} />
      <section className="settings-paths muted">
        <div>
          Settings file: <code data-testid="settings-file">{view.settingsFile}</code>
        </div>
        <div>
          Run store: <code data-testid="run-store">{view.runStore}</code>
        </div>
      </section>
    </div>
  );
}
