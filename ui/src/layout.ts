// How the window is divided, as the person left it: the palette's and the side panel's widths,
// the log's height, which of them are collapsed, whether the minimap shows, the theme, and
// which way "Tidy up" lays a flow out.
// Kept in localStorage, so the app opens as it was closed.

import type { TidyArrangement } from './tidy';

export type Theme = 'system' | 'light' | 'dark';

export interface Layout {
  paletteWidth: number;
  paletteCollapsed: boolean;
  sideWidth: number;
  sideCollapsed: boolean;
  logHeight: number;
  /** The log opens by itself when a run starts; until then it takes no room. */
  logCollapsed: boolean;
  minimap: boolean;
  theme: Theme;
  tidyDirection: TidyArrangement;
}

export const DEFAULT_LAYOUT: Layout = {
  paletteWidth: 168,
  paletteCollapsed: false,
  sideWidth: 360,
  sideCollapsed: false,
  logHeight: 210,
  logCollapsed: true,
  minimap: true,
  theme: 'system',
  tidyDirection: 'right',
};

/** How far each panel may be dragged, in pixels. */
export const LIMITS = {
  paletteWidth: { min: 120, max: 360 },
  sideWidth: { min: 260, max: 760 },
  logHeight: { min: 80, max: 600 },
} as const;

const KEY = 'weft.layout';

function clamp(value: unknown, limit: { min: number; max: number }, fallback: number): number {
  return typeof value === 'number' && Number.isFinite(value) ? Math.min(limit.max, Math.max(limit.min, value)) : fallback;
}

/** The layout read back from `storage` (a missing or damaged entry is the default). */
export function loadLayout(storage: Pick<Storage, 'getItem'> | undefined = globalThis.localStorage): Layout {
  let saved: Partial<Layout> = {};
  try {
    const text = storage?.getItem(KEY);
    if (text) saved = JSON.parse(text) as Partial<Layout>;
  } catch {
    saved = {};
  }
  const flag = (value: unknown, fallback: boolean) => (typeof value === 'boolean' ? value : fallback);
  return {
    paletteWidth: clamp(saved.paletteWidth, LIMITS.paletteWidth, DEFAULT_LAYOUT.paletteWidth),
    paletteCollapsed: flag(saved.paletteCollapsed, DEFAULT_LAYOUT.paletteCollapsed),
    sideWidth: clamp(saved.sideWidth, LIMITS.sideWidth, DEFAULT_LAYOUT.sideWidth),
    sideCollapsed: flag(saved.sideCollapsed, DEFAULT_LAYOUT.sideCollapsed),
    logHeight: clamp(saved.logHeight, LIMITS.logHeight, DEFAULT_LAYOUT.logHeight),
    // Not remembered: the log takes no room until a run starts.
    logCollapsed: DEFAULT_LAYOUT.logCollapsed,
    minimap: flag(saved.minimap, DEFAULT_LAYOUT.minimap),
    theme: saved.theme === 'light' || saved.theme === 'dark' ? saved.theme : 'system',
    tidyDirection: saved.tidyDirection === 'down' || saved.tidyDirection === 'rows' ? saved.tidyDirection : 'right',
  };
}

/** A store of the layout that keeps every change (for `useSyncExternalStore`). */
export class LayoutStore {
  private layout: Layout;
  private listeners = new Set<() => void>();

  constructor(
    private readonly storage: Pick<Storage, 'getItem' | 'setItem'> | undefined = globalThis.localStorage,
  ) {
    this.layout = loadLayout(storage);
  }

  subscribe = (listener: () => void): (() => void) => {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  };

  getSnapshot = (): Layout => this.layout;

  set(patch: Partial<Layout>): void {
    const next = { ...this.layout, ...patch };
    next.paletteWidth = clamp(next.paletteWidth, LIMITS.paletteWidth, this.layout.paletteWidth);
    next.sideWidth = clamp(next.sideWidth, LIMITS.sideWidth, this.layout.sideWidth);
    next.logHeight = clamp(next.logHeight, LIMITS.logHeight, this.layout.logHeight);
    this.layout = next;
    try {
      this.storage?.setItem(KEY, JSON.stringify(next));
    } catch {
      // A full or refused storage only loses the layout for the next start.
    }
    for (const listener of [...this.listeners]) listener();
  }
}
