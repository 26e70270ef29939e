import { describe, expect, it } from 'vitest';
import { SHORTCUTS, shortcutFor, type KeyLike } from './shortcuts';

function key(k: string, mods: Partial<KeyLike> = {}): KeyLike {
  return { key: k, ctrlKey: false, metaKey: false, shiftKey: false, altKey: false, ...mods };
}

describe('shortcuts', () => {
  it('tells undo from redo', () => {
    expect(shortcutFor(key('z', { ctrlKey: true }), false)?.action).toBe('undo');
    expect(shortcutFor(key('Z', { ctrlKey: true, shiftKey: true }), false)?.action).toBe('redo');
    expect(shortcutFor(key('y', { ctrlKey: true }), false)?.action).toBe('redo');
    expect(shortcutFor(key('z', { metaKey: true }), false)?.action).toBe('undo');
  });

  it('keeps editing keys away from text fields, but saves from them', () => {
    expect(shortcutFor(key('Delete'), false)?.action).toBe('delete');
    expect(shortcutFor(key('Backspace'), true)).toBeUndefined();
    expect(shortcutFor(key('z', { ctrlKey: true }), true)).toBeUndefined();
    expect(shortcutFor(key('f'), true)).toBeUndefined();
    expect(shortcutFor(key('s', { ctrlKey: true }), true)?.action).toBe('save');
    expect(shortcutFor(key('S', { ctrlKey: true, shiftKey: true }), true)?.action).toBe('saveAs');
  });

  it('opens the help with ?, whatever Shift it takes', () => {
    expect(shortcutFor(key('?', { shiftKey: true }), false)?.action).toBe('help');
  });

  it('does not take plain letters typed with Ctrl for other shortcuts', () => {
    expect(shortcutFor(key('f', { ctrlKey: true }), false)).toBeUndefined();
    expect(shortcutFor(key('f'), false)?.action).toBe('fitView');
  });

  it('lists every action the handler takes', () => {
    const actions = SHORTCUTS.flatMap((shortcut) => (shortcut.action ? [shortcut.action] : []));
    expect(new Set(actions).size).toBe(actions.length);
  });
});
