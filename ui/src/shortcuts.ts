// The one table of keyboard shortcuts: the key handler dispatches from it and the help
// panel lists it, so the two cannot disagree.

export type ShortcutAction =
  | 'new'
  | 'open'
  | 'save'
  | 'saveAs'
  | 'undo'
  | 'redo'
  | 'copy'
  | 'paste'
  | 'delete'
  | 'selectAll'
  | 'fitView'
  | 'tidy'
  | 'run'
  | 'breakpoint'
  | 'help'
  | 'escape';

export interface Shortcut {
  /** What the handler does; `null` for gestures the canvas itself handles (listed only). */
  action: ShortcutAction | null;
  /** Key combinations, e.g. `Mod+Shift+Z`; `Mod` is Ctrl (⌘ on macOS). */
  keys: string[];
  description: string;
  /** Fires even while typing in a text field (saving and running should). */
  inInputs?: boolean;
}

export const SHORTCUTS: readonly Shortcut[] = [
  { action: 'new', keys: ['Mod+N'], description: 'New flow' },
  { action: 'open', keys: ['Mod+O'], description: 'Open a flow file' },
  { action: 'save', keys: ['Mod+S'], description: 'Save', inInputs: true },
  { action: 'saveAs', keys: ['Mod+Shift+S'], description: 'Save as…', inInputs: true },
  { action: 'undo', keys: ['Mod+Z'], description: 'Undo' },
  { action: 'redo', keys: ['Mod+Shift+Z', 'Mod+Y'], description: 'Redo' },
  { action: 'copy', keys: ['Mod+C'], description: 'Copy the selected nodes' },
  { action: 'paste', keys: ['Mod+V'], description: 'Paste' },
  { action: 'delete', keys: ['Delete', 'Backspace'], description: 'Delete the selection' },
  { action: 'selectAll', keys: ['Mod+A'], description: 'Select everything' },
  { action: null, keys: ['Shift+Click'], description: 'Add a node or edge to the selection' },
  { action: null, keys: ['Shift+Drag'], description: 'Select with a box' },
  { action: 'fitView', keys: ['F'], description: 'Fit the flow into view' },
  { action: 'tidy', keys: ['Shift+T'], description: 'Tidy up: lay the flow out in layers, in the direction chosen beside the button' },
  { action: 'run', keys: ['Mod+Enter'], description: 'Run the flow', inInputs: true },
  { action: 'breakpoint', keys: ['F9'], description: 'Stop before the selected node when the flow runs (again: no longer)' },
  { action: 'help', keys: ['?'], description: 'Show or hide this help' },
  { action: 'escape', keys: ['Escape'], description: 'Close a dialog or this help' },
];

export interface KeyLike {
  key: string;
  ctrlKey: boolean;
  metaKey: boolean;
  shiftKey: boolean;
  altKey: boolean;
}

/** Whether `event` is the combination `combo` (as written in `SHORTCUTS`). */
export function matchesCombo(combo: string, event: KeyLike): boolean {
  const parts = combo.split('+');
  const key = parts[parts.length - 1];
  const modifiers = new Set(parts.slice(0, -1));
  const mod = event.ctrlKey || event.metaKey;
  if (modifiers.has('Mod') !== mod) return false;
  if (modifiers.has('Alt') !== event.altKey) return false;
  // A printable symbol such as `?` already implies whatever Shift its layout needs.
  const symbol = key.length === 1 && !/[a-z0-9]/i.test(key);
  if (!symbol && modifiers.has('Shift') !== event.shiftKey) return false;
  return event.key.toLowerCase() === key.toLowerCase();
}

/** The shortcut `event` triggers, if any; `typing` is true while focus is in a text field. */
export function shortcutFor(event: KeyLike, typing: boolean): Shortcut | undefined {
  return SHORTCUTS.find(
    (shortcut) =>
      shortcut.action !== null &&
      (!typing || shortcut.inInputs || shortcut.action === 'escape') &&
      shortcut.keys.some((combo) => matchesCombo(combo, event)),
  );
}

/** Whether focus is somewhere keys are text (inputs, text areas, selects, editable content). */
export function isTyping(target: EventTarget | null): boolean {
  if (!(target instanceof HTMLElement)) return false;
  if (target.isContentEditable) return true;
  const tag = target.tagName;
  if (tag === 'TEXTAREA' || tag === 'SELECT') return true;
  if (tag !== 'INPUT') return false;
  const type = (target as HTMLInputElement).type;
  return !['checkbox', 'radio', 'button', 'submit', 'reset', 'range', 'color'].includes(type);
}

/** `Mod+Shift+Z` as shown to a person on this platform. */
export function displayCombo(combo: string): string {
  const mac = typeof navigator !== 'undefined' && /Mac/i.test(navigator.platform);
  return combo
    .split('+')
    .map((part) => (part === 'Mod' ? (mac ? '⌘' : 'Ctrl') : part))
    .join('+');
}
