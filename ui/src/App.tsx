// The window: toolbar, palette, canvas, side panel (Inspector, Problems, History, Tests,
// Settings) and log; the dialogs; and the keyboard shortcuts, dispatched from the one table
// in shortcuts.ts.

import { useCallback, useEffect, useLayoutEffect, useMemo, useRef, useState, type RefObject } from 'react';
import { ReactFlowProvider } from '@xyflow/react';
import { Canvas, useFitReadable, useTidyUp } from './components/Canvas';
import { ConfirmDialog } from './components/ConfirmDialog';
import { HelpPanel } from './components/HelpPanel';
import { CompareView, HistoryPanel } from './components/HistoryPanel';
import { FlowCompareBanner } from './components/VersionsPanel';
import { InboxPanel, PausedApprovalCard } from './components/InboxPanel';
import { Inspector } from './components/Inspector';
import { LogPanel } from './components/LogPanel';
import { Palette } from './components/Palette';
import { PathDialog } from './components/PathDialog';
import { ProblemsPanel } from './components/ProblemsPanel';
import { SettingsPanel } from './components/SettingsPanel';
import { TestsPanel } from './components/TestsPanel';
import { Toolbar } from './components/Toolbar';
import { Splitter } from './components/Splitter';
import { SessionContext, useCanvas, useLayout, useRun, useSession, useSessionState } from './hooks';
import type { Theme } from './layout';
import type { Session } from './session';
import { isTyping, shortcutFor, type ShortcutAction } from './shortcuts';
import { markStartup } from './startup';

type Tab = 'inspector' | 'problems' | 'inbox' | 'history' | 'tests' | 'settings';

/** How often the inbox is read again (runs paused by `weft` or a server appear). */
const INBOX_POLL_MS = 3000;

const TABS: { id: Tab; label: string }[] = [
  { id: 'inspector', label: 'Inspector' },
  { id: 'problems', label: 'Problems' },
  { id: 'inbox', label: 'Inbox' },
  { id: 'history', label: 'History' },
  { id: 'tests', label: 'Tests' },
  { id: 'settings', label: 'Settings' },
];

type PathDialogMode = 'open' | 'saveAs';

export function App({ session }: { session: Session }) {
  return (
    <SessionContext.Provider value={session}>
      <ReactFlowProvider>
        <Shell />
      </ReactFlowProvider>
    </SessionContext.Provider>
  );
}

function ErrorBanner() {
  const session = useSession();
  const errors = useSessionState((state) => state.errors);
  if (errors.length === 0) return null;
  const newest = errors[errors.length - 1];
  return (
    <div
      className={newest.notice ? 'banner viewing' : 'banner error'}
      role={newest.notice ? 'status' : 'alert'}
      data-testid={newest.notice ? 'notice-banner' : 'error-banner'}
    >
      <span className="banner-text">{newest.message}</span>
      {errors.length > 1 && <span className="muted"> (and {errors.length - 1} earlier)</span>}
      <button
        type="button"
        className="icon-button"
        data-testid="error-dismiss"
        title="Dismiss"
        onClick={() => errors.forEach((banner) => session.dismissError(banner.id))}
      >
        ×
      </button>
    </div>
  );
}

function PausedBanner() {
  const session = useSession();
  const history = useSessionState((state) => state.history);
  const dismissed = useSessionState((state) => state.pausedBannerDismissed);
  const viewing = useSessionState((state) => state.viewing !== null);
  const shownRun = useRun((view) => view.runId);
  // The run on the canvas shows its own approval prompt; the banner is for the others.
  const paused = history.filter((run) => run.status === 'paused' && run.id !== shownRun);
  if (dismissed || viewing || paused.length === 0) return null;
  return (
    <div className="banner paused" data-testid="paused-banner">
      <span className="banner-text">
        {paused.length === 1 ? '1 run waits for approval' : `${paused.length} runs wait for approval`}
      </span>
      <button type="button" className="button small" data-testid="paused-banner-open" onClick={() => void session.openRun(paused[0].id)}>
        Open the newest
      </button>
      <button type="button" className="icon-button" title="Dismiss" onClick={() => session.dismissPausedBanner()}>
        ×
      </button>
    </div>
  );
}

function ViewingBanner() {
  const session = useSession();
  const viewing = useSessionState((state) => state.viewing);
  const busy = useSessionState((state) => state.busy);
  const status = useRun((view) => view.status);
  if (!viewing) return null;
  return (
    <div className="banner viewing" data-testid="viewing-banner">
      <span className="banner-text">
        Viewing {viewing.server ? 'run' : 'past run'} <code>{viewing.run.summary.id.slice(0, 8)}</code> of “
        {viewing.run.summary.flowName || 'Untitled'}”
        {viewing.server && (
          <>
            {' '}
            on server <strong data-testid="viewing-server">{viewing.server}</strong>
          </>
        )}{' '}
        ({status}) — read only
        {viewing.server && (status === 'running' || status === 'paused')
          ? `; it goes on on the server${status === 'running' ? ', followed live' : ''}, and is continued or decided here`
          : ''}
        . Your flow is kept as it was.
        {status === 'interrupted' && ' Its process stopped before it ended: continue it to run what was cut off.'}
      </span>
      {status === 'interrupted' && (
        <button type="button" className="button small primary" data-testid="continue-run" disabled={busy} onClick={() => void session.continueRun()}>
          Continue
        </button>
      )}
      <button type="button" className="button small" data-testid="back-to-editing" disabled={busy} onClick={() => session.backToEditing()}>
        Back to editing
      </button>
    </div>
  );
}

/** The width of a collapsed panel: room for the button that opens it again. */
const COLLAPSED_PX = 26;

/** A collapsed panel: a narrow bar whose button opens it again. */
function CollapsedBar({ testId, label, arrow, onOpen }: { testId: string; label: string; arrow: string; onOpen: () => void }) {
  return (
    <div className="collapsed-bar">
      <button type="button" className="icon-button" data-testid={testId} title={label} aria-label={label} onClick={onOpen}>
        {arrow}
      </button>
    </div>
  );
}

/** The theme to draw: the one chosen, or the system's (followed as it changes). */
function useSystemTheme(theme: Theme): 'light' | 'dark' {
  const query = useMemo(
    () => (typeof window !== 'undefined' && window.matchMedia ? window.matchMedia('(prefers-color-scheme: dark)') : null),
    [],
  );
  const [systemDark, setSystemDark] = useState(query?.matches ?? false);
  useEffect(() => {
    if (!query) return;
    const onChange = (event: MediaQueryListEvent) => setSystemDark(event.matches);
    query.addEventListener('change', onChange);
    return () => query.removeEventListener('change', onChange);
  }, [query]);
  if (theme === 'system') return systemDark ? 'dark' : 'light';
  return theme;
}

// The tabs' counts read the session themselves: the flow's first problems arrive just after
// the window's first frame, and a count read by the shell drew the whole window again then.
function ProblemCount() {
  const count = useSessionState((state) => state.problems.length);
  return count > 0 ? <span className="tab-count">{count}</span> : null;
}

function InboxCount() {
  const count = useSessionState((state) => state.inbox.length);
  return count > 0 ? (
    <span className="tab-count" data-testid="inbox-count">
      {count}
    </span>
  ) : null;
}

interface ViewActions {
  fitReadable: ReturnType<typeof useFitReadable>;
  tidyUp: ReturnType<typeof useTidyUp>;
}

/** Puts the canvas's view actions in `into`, for the shell's toolbar and shortcuts. Apart
 *  from the shell because React Flow draws whoever holds its instance again when its view is
 *  ready, a moment after the first frame: the shell would draw the whole window again then. */
function ViewActionsHost({ into }: { into: RefObject<ViewActions | null> }) {
  const fitReadable = useFitReadable();
  const tidyUp = useTidyUp();
  useLayoutEffect(() => {
    into.current = { fitReadable, tidyUp };
  }, [into, fitReadable, tidyUp]);
  return null;
}

function Shell() {
  const session = useSession();
  const view = useRef<ViewActions | null>(null);
  const dirty = useCanvas((state) => state.dirty);
  const path = useCanvas((state) => state.path);
  const selection = useCanvas((state) => state.selection);
  const viewSelection = useSessionState((state) => state.viewSelection);
  const layout = useLayout((current) => current);
  const theme = useSystemTheme(layout.theme);
  const columns = [
    layout.paletteCollapsed ? `${COLLAPSED_PX}px` : `${layout.paletteWidth}px`,
    'auto',
    'minmax(0, 1fr)',
    'auto',
    layout.sideCollapsed ? `${COLLAPSED_PX}px` : `${layout.sideWidth}px`,
  ].join(' ');
  const [tab, setTab] = useState<Tab>('inspector');
  // React's first render of the whole window is in the DOM (the app's benchmark reads it).
  useLayoutEffect(() => markStartup('committed'), []);
  // Runs paused by `weft` or a server in the same store join the inbox as they pause.
  useEffect(() => {
    const timer = setInterval(() => void session.refreshInbox(), INBOX_POLL_MS);
    return () => clearInterval(timer);
  }, [session]);
  const [input, setInput] = useState('');
  const loads = useCanvas((state) => state.loads);

  // The input belongs to the flow it was typed for: another flow starts from its own
  // start node's initial input (shown as the placeholder).
  useEffect(() => setInput(''), [loads]);
  const [pathDialog, setPathDialog] = useState<PathDialogMode | null>(null);
  const [discard, setDiscard] = useState<(() => void) | null>(null);
  const [help, setHelp] = useState(false);

  // Selecting one node on the canvas shows its fields, unless the person is working
  // through the problems list.
  useEffect(() => {
    if (selection.nodes.length === 1 || viewSelection) {
      setTab((current) => (current === 'problems' ? current : 'inspector'));
    }
  }, [selection.nodes, viewSelection]);

  // Closing the window with unsaved changes asks first.
  useEffect(() => {
    if (!dirty) return;
    const onBeforeUnload = (event: BeforeUnloadEvent) => {
      event.preventDefault();
      event.returnValue = '';
    };
    window.addEventListener('beforeunload', onBeforeUnload);
    return () => window.removeEventListener('beforeunload', onBeforeUnload);
  }, [dirty]);

  /** Runs `then` now, or after the person agreed to drop unsaved changes. */
  const unlessDirty = useCallback(
    (then: () => void) => {
      if (session.canvas.getSnapshot().dirty) setDiscard(() => then);
      else then();
    },
    [session],
  );

  const actions: Record<ShortcutAction, () => void> = {
    new: () => unlessDirty(() => session.createNew()),
    open: () => unlessDirty(() => setPathDialog('open')),
    save: () => {
      const current = session.canvas.getSnapshot().path;
      if (current) void session.save(current);
      else setPathDialog('saveAs');
    },
    saveAs: () => setPathDialog('saveAs'),
    undo: () => !session.getSnapshot().viewing && session.canvas.undo(),
    redo: () => !session.getSnapshot().viewing && session.canvas.redo(),
    copy: () => !session.getSnapshot().viewing && session.canvas.copy(),
    paste: () => !session.getSnapshot().viewing && session.canvas.paste(),
    delete: () => !session.getSnapshot().viewing && session.canvas.deleteSelection(),
    selectAll: () => !session.getSnapshot().viewing && session.canvas.selectAll(),
    fitView: () => view.current?.fitReadable(),
    tidy: () => !session.getSnapshot().viewing && view.current?.tidyUp(session.layout.getSnapshot().tidyDirection),
    run: () => void session.startRun(input),
    breakpoint: () => {
      const selected = session.canvas.getSnapshot().selection.nodes;
      if (!session.getSnapshot().viewing && selected.length === 1) session.toggleBreakpoint(selected[0]);
    },
    help: () => setHelp((open) => !open),
    escape: () => {
      if (help) setHelp(false);
      else if (pathDialog) setPathDialog(null);
      else if (discard) setDiscard(null);
      else session.canvas.select([], []);
    },
  };
  const actionsRef = useRef(actions);
  actionsRef.current = actions;

  // A flow file dragged from the file manager onto the window opens (after asking, when the
  // flow shown has unsaved changes).
  const unlessDirtyRef = useRef(unlessDirty);
  unlessDirtyRef.current = unlessDirty;
  useEffect(() => {
    let stop: (() => void) | null = null;
    let live = true;
    void session.api
      .onFileDrop((paths) => {
        const flow = paths.find((dropped) => dropped.toLowerCase().endsWith('.json'));
        if (flow) unlessDirtyRef.current(() => void session.open(flow));
        else if (paths.length > 0) session.reportError({ code: 'flowFile', message: 'Drop a flow file (.json) to open it.' });
      })
      .then((unlisten) => {
        if (live) stop = unlisten;
        else unlisten();
      })
      .catch(() => {
        // Outside the desktop shell (tests in a browser) there is no file drop.
      });
    return () => {
      live = false;
      stop?.();
    };
  }, [session]);
  const modalOpen = help || pathDialog !== null || discard !== null;
  const modalRef = useRef(modalOpen);
  modalRef.current = modalOpen;

  useEffect(() => {
    const onKeyDown = (event: KeyboardEvent) => {
      const typing = isTyping(event.target);
      const shortcut = shortcutFor(event, typing);
      if (!shortcut?.action) return;
      // Escape in a field leaves the field; it does not drop the selection being edited.
      if (shortcut.action === 'escape' && typing && !modalRef.current) {
        (event.target as HTMLElement).blur();
        return;
      }
      // Text selected in the log or a panel is copied by the browser, not as nodes.
      if (shortcut.action === 'copy' && (window.getSelection()?.toString() ?? '') !== '') return;
      // With a dialog open only Escape (and ? for the help itself) reaches the app.
      if (modalRef.current && shortcut.action !== 'escape' && shortcut.action !== 'help') return;
      if (modalRef.current && shortcut.action === 'help' && typing) return;
      event.preventDefault();
      actionsRef.current[shortcut.action]();
    };
    window.addEventListener('keydown', onKeyDown);
    return () => window.removeEventListener('keydown', onKeyDown);
  }, []);

  const confirmPath = async (chosen: string) => {
    const done = pathDialog === 'open' ? await session.open(chosen) : await session.save(chosen);
    if (done) setPathDialog(null);
  };

  return (
    <div className="app" data-theme={theme}>
      <ViewActionsHost into={view} />
      <Toolbar
        onNew={actions.new}
        onOpen={actions.open}
        onSave={actions.save}
        onSaveAs={actions.saveAs}
        onFitView={actions.fitView}
        onTidy={actions.tidy}
        onHelp={() => setHelp(true)}
        input={input}
        onInput={setInput}
        onRun={actions.run}
      />
      <main className="workspace" style={{ gridTemplateColumns: columns }}>
        {layout.paletteCollapsed ? (
          <CollapsedBar testId="palette-expand" label="Show the palette" arrow="›" onOpen={() => session.layout.set({ paletteCollapsed: false })} />
        ) : (
          <Palette onCollapse={() => session.layout.set({ paletteCollapsed: true })} />
        )}
        {layout.paletteCollapsed ? (
          <span />
        ) : (
          <Splitter
            testId="palette-splitter"
            direction="columns"
            size={layout.paletteWidth}
            sign={1}
            label="Drag to widen or narrow the palette"
            onResize={(paletteWidth) => session.layout.set({ paletteWidth })}
          />
        )}
        {/* The banners float over the top of the canvas: the canvas does not move when one
            comes or goes (a node grabbed at that moment would be missed). */}
        <div className="canvas-column">
          <div className="banners">
            <ErrorBanner />
            <PausedBanner />
            <ViewingBanner />
            <FlowCompareBanner />
          </div>
          <Canvas theme={theme} />
          <CompareView />
        </div>
        {layout.sideCollapsed ? (
          <span />
        ) : (
          <Splitter
            testId="side-splitter"
            direction="columns"
            size={layout.sideWidth}
            sign={-1}
            label="Drag to widen or narrow the side panel"
            onResize={(sideWidth) => session.layout.set({ sideWidth })}
          />
        )}
        {layout.sideCollapsed ? (
          <CollapsedBar testId="side-expand" label="Show the side panel" arrow="‹" onOpen={() => session.layout.set({ sideCollapsed: false })} />
        ) : (
        <aside className="side-panel" data-testid="side-panel">
          <div className="tabs-row">
            <nav className="tabs" role="tablist">
              {TABS.map(({ id, label }) => (
                <button
                  key={id}
                  type="button"
                  role="tab"
                  aria-selected={tab === id}
                  className={`tab ${tab === id ? 'active' : ''}`}
                  data-testid={`tab-${id}`}
                  onClick={() => setTab(id)}
                >
                  {label}
                  {id === 'problems' && <ProblemCount />}
                  {id === 'inbox' && <InboxCount />}
                </button>
              ))}
            </nav>
            <button
              type="button"
              className="icon-button side-collapse"
              data-testid="side-collapse"
              title="Hide the side panel"
              aria-label="Hide the side panel"
              onClick={() => session.layout.set({ sideCollapsed: true })}
            >
              ›
            </button>
          </div>
          <PausedApprovalCard />
          <div className="tab-panel">
            {tab === 'inspector' && <Inspector />}
            {tab === 'inbox' && <InboxPanel />}
            {tab === 'problems' && <ProblemsPanel />}
            {tab === 'history' && <HistoryPanel />}
            {tab === 'tests' && <TestsPanel />}
            {tab === 'settings' && <SettingsPanel />}
          </div>
        </aside>
        )}
      </main>
      <LogPanel />
      {pathDialog && (
        <PathDialog
          mode={pathDialog === 'open' ? 'open' : 'save'}
          title={pathDialog === 'open' ? 'Open a flow' : 'Save the flow as'}
          confirmLabel={pathDialog === 'open' ? 'Open' : 'Save'}
          initialPath={pathDialog === 'saveAs' ? path ?? '' : ''}
          onConfirm={(chosen) => void confirmPath(chosen)}
          onCancel={() => setPathDialog(null)}
        />
      )}
      {discard && (
        <ConfirmDialog
          testId="confirm-discard"
          title="Discard unsaved changes?"
          confirmLabel="Discard changes"
          confirmTestId="discard-confirm"
          cancelTestId="discard-cancel"
          onConfirm={() => {
            const then = discard;
            setDiscard(null);
            then();
          }}
          onCancel={() => setDiscard(null)}
        >
          The flow has changes that are not saved. They are lost if you go on.
        </ConfirmDialog>
      )}
      {help && <HelpPanel onClose={() => setHelp(false)} />}
    </div>
  );
}
