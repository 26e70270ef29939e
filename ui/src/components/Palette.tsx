// The node kinds to add, one entry per kind of the catalog. Dragging uses pointer events
// rather than HTML5 drag and drop: WebDriver cannot drive HTML5 drag and drop in WebKit,
// and pointer events also let the drop point be exact. A click (no movement) adds the node
// at the centre of the view.

import { useEffect, useRef, useState, type PointerEvent as ReactPointerEvent } from 'react';
import { useReactFlow } from '@xyflow/react';
import { defaultData, type KindDescription } from '../catalog';
import { useSession, useSessionState } from '../hooks';
import { markStartup } from '../startup';

/** How far the pointer must move before a press on an entry becomes a drag. */
const DRAG_THRESHOLD_PX = 4;

interface Drag {
  kind: KindDescription;
  startX: number;
  startY: number;
  x: number;
  y: number;
  moved: boolean;
}

function canvasElement(): HTMLElement | null {
  return document.querySelector<HTMLElement>('[data-testid="canvas"]');
}

function overCanvas(x: number, y: number): boolean {
  const canvas = canvasElement();
  if (!canvas) return false;
  const rect = canvas.getBoundingClientRect();
  return x >= rect.left && x <= rect.right && y >= rect.top && y <= rect.bottom;
}

/** The kinds whose title, id or help has every word of `query`, best (title) matches first. */
export function matchingKinds(kinds: readonly KindDescription[], query: string): KindDescription[] {
  const words = query.toLowerCase().split(/\s+/).filter(Boolean);
  if (words.length === 0) return [...kinds];
  const scored = kinds
    .map((kind) => {
      const title = `${kind.title} ${kind.id}`.toLowerCase();
      const text = `${title} ${kind.help}`.toLowerCase();
      if (!words.every((word) => text.includes(word))) return null;
      const score = words.every((word) => title.includes(word)) ? (title.startsWith(words[0]) ? 0 : 1) : 2;
      return { kind, score };
    })
    .filter((entry): entry is { kind: KindDescription; score: number } => entry !== null);
  scored.sort((a, b) => a.score - b.score);
  return scored.map((entry) => entry.kind);
}

export function Palette({ onCollapse }: { onCollapse?: () => void }) {
  const session = useSession();
  const catalog = useSessionState((state) => state.catalog);
  const [query, setQuery] = useState('');
  const viewing = useSessionState((state) => state.viewing !== null);
  const { screenToFlowPosition } = useReactFlow();
  const [drag, setDrag] = useState<Drag | null>(null);
  const dragRef = useRef<Drag | null>(null);
  // A press handled by the pointer handlers is followed by a click event on the entry; that
  // click must not add a second node. Clicks with no press before them (keyboard, scripted
  // clicks) add at the centre.
  const suppressClick = useRef(false);
  const dragging = drag !== null;

  const addAt = (kind: KindDescription, screen: { x: number; y: number }) => {
    if (!catalog) return;
    const position = screenToFlowPosition(screen);
    session.canvas.addNode(kind.id, defaultData(kind), position);
  };

  const addAtCentre = (kind: KindDescription) => {
    const canvas = canvasElement();
    if (!canvas) return;
    const rect = canvas.getBoundingClientRect();
    addAt(kind, { x: rect.left + rect.width / 2, y: rect.top + rect.height / 2 });
  };

  useEffect(() => {
    if (!dragging) return;
    const onMove = (event: PointerEvent) => {
      const current = dragRef.current;
      if (!current) return;
      const moved =
        current.moved ||
        Math.hypot(event.clientX - current.startX, event.clientY - current.startY) > DRAG_THRESHOLD_PX;
      const next = { ...current, x: event.clientX, y: event.clientY, moved };
      dragRef.current = next;
      setDrag(next);
    };
    const onUp = (event: PointerEvent) => {
      const current = dragRef.current;
      dragRef.current = null;
      setDrag(null);
      if (!current) return;
      suppressClick.current = true;
      setTimeout(() => {
        suppressClick.current = false;
      }, 0);
      if (!current.moved) addAtCentre(current.kind);
      else if (overCanvas(event.clientX, event.clientY)) addAt(current.kind, { x: event.clientX, y: event.clientY });
    };
    const onCancel = () => {
      dragRef.current = null;
      setDrag(null);
    };
    window.addEventListener('pointermove', onMove);
    window.addEventListener('pointerup', onUp);
    window.addEventListener('pointercancel', onCancel);
    return () => {
      window.removeEventListener('pointermove', onMove);
      window.removeEventListener('pointerup', onUp);
      window.removeEventListener('pointercancel', onCancel);
    };
    // Listeners are installed once per drag; the drag's state is read from the ref.
  }, [dragging]);

  const onPointerDown = (kind: KindDescription) => (event: ReactPointerEvent) => {
    if (event.button !== 0 || viewing) return;
    event.preventDefault();
    const start: Drag = {
      kind,
      startX: event.clientX,
      startY: event.clientY,
      x: event.clientX,
      y: event.clientY,
      moved: false,
    };
    dragRef.current = start;
    setDrag(start);
  };

  const kinds = catalog ? matchingKinds(catalog.kinds, query) : [];
  useEffect(() => {
    if (catalog) markStartup('palette');
  }, [catalog]);
  return (
    <aside className="palette" data-testid="palette">
      <div className="palette-head">
        <h2 className="panel-title">Nodes</h2>
        {onCollapse && (
          <button type="button" className="icon-button" data-testid="palette-collapse" title="Hide the palette" onClick={onCollapse}>
            ‹
          </button>
        )}
      </div>
      <input
        className="input palette-search"
        data-testid="palette-search"
        placeholder="Search kinds"
        aria-label="Search the node kinds (Enter adds the first match)"
        title="Type to filter the kinds; Enter adds the first match"
        value={query}
        disabled={viewing}
        onChange={(event) => setQuery(event.target.value)}
        onKeyDown={(event) => {
          if (event.key === 'Enter' && kinds[0]) {
            event.preventDefault();
            addAtCentre(kinds[0]);
            setQuery('');
          } else if (event.key === 'Escape') {
            setQuery('');
          }
        }}
      />
      {!catalog && <p className="muted">Loading node kinds…</p>}
      {catalog && kinds.length === 0 && <p className="muted" data-testid="palette-none">No kind matches.</p>}
      <ul className="palette-list">
        {kinds.map((kind) => (
          <li key={kind.id}>
            <button
              type="button"
              className={`palette-item kind-${kind.id}`}
              data-testid={`palette-${kind.id}`}
              data-kind={kind.id}
              title={kind.help}
              disabled={viewing}
              onPointerDown={onPointerDown(kind)}
              onClick={() => {
                if (suppressClick.current) suppressClick.current = false;
                else addAtCentre(kind);
              }}
            >
              <span className="palette-swatch" />
              {kind.title}
            </button>
          </li>
        ))}
      </ul>
      <p className="palette-hint muted">Drag onto the canvas, or click to add in the middle; Enter in the search adds the first match.</p>
      {drag?.moved && (
        <div className="drag-ghost" style={{ left: drag.x, top: drag.y }} data-testid="drag-ghost">
          {drag.kind.title}
        </div>
      )}
    </aside>
  );
}
