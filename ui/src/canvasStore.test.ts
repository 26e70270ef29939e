import { describe, expect, it } from 'vitest';
import { CanvasStore } from './canvasStore';
import { getPath } from './flowMapping';
import { offlineFlow } from './test/fixtures';

function store() {
  return new CanvasStore(offlineFlow(), '/flows/offline.json');
}

const nodeIds = (s: CanvasStore) => s.getSnapshot().flow.nodes.map((node) => node.id);
const field = (s: CanvasStore, id: string, name: string) =>
  getPath(s.getSnapshot().flow.nodes.find((node) => node.id === id)?.data, name);

describe('undo and redo', () => {
  it('undoes a tidy-up (nodes placed anew) in one step, and redoes it', () => {
    const s = store();
    const before = s.getSnapshot().flow;
    const positions = new Map(before.nodes.map((node, i) => [node.id, { x: i * 300.4, y: 10 }]));
    s.placeNodes(positions);
    expect(s.getSnapshot().flow.nodes.map((node) => node.position)).toEqual(before.nodes.map((_, i) => ({ x: Math.round(i * 300.4), y: 10 })));
    expect(s.getSnapshot().dirty).toBe(true);
    s.undo();
    expect(s.getSnapshot().flow).toBe(before);
    expect(s.getSnapshot().dirty).toBe(false);
    s.redo();
    expect(s.getSnapshot().flow.nodes[1].position).toEqual({ x: 300, y: 10 });
    // Placing nodes where they already are is no step at all.
    s.placeNodes(positions);
    s.undo();
    expect(s.getSnapshot().flow).toBe(before);
  });

  it('undoes and redoes adding a node and editing it', () => {
    const s = store();
    const id = s.addNode('agent', { label: 'Agent' }, { x: 10, y: 20 });
    expect(id).toBe('agent-1');
    s.setNodeField(id, 'model', 'gpt-4o-mini');
    s.undo();
    expect(field(s, id, 'model')).toBeUndefined();
    expect(nodeIds(s)).toContain('agent-1');
    s.undo();
    expect(nodeIds(s)).not.toContain('agent-1');
    expect(s.getSnapshot().canUndo).toBe(false);
    s.redo();
    s.redo();
    expect(field(s, id, 'model')).toBe('gpt-4o-mini');
    expect(s.getSnapshot().canRedo).toBe(false);
  });

  it('adds a node wired from the handle a connection was dropped from, as one step', () => {
    const s = store();
    const id = s.addConnectedNode('template', { label: 'Template' }, { x: 400.4, y: 80.6 }, { source: 'large', sourceHandle: 'false' });
    const flow = s.getSnapshot().flow;
    const added = flow.nodes.find((node) => node.id === id)!;
    expect(added.position).toEqual({ x: 400, y: 81 });
    const edge = flow.edges.find((candidate) => candidate.target === id)!;
    expect(edge).toMatchObject({ source: 'large', sourceHandle: 'false', targetHandle: 'input' });
    expect(s.getSnapshot().selection.nodes).toEqual([id]);
    s.undo();
    expect(nodeIds(s)).not.toContain(id);
    expect(s.getSnapshot().flow.edges.some((candidate) => candidate.target === id)).toBe(false);
  });

  it('makes typing into one field one step, and another field another', () => {
    const s = store();
    for (const text of ['A', 'Ap', 'App']) s.setNodeField('review', 'message', text);
    s.setNodeField('review', 'label', 'Boss');
    s.undo();
    expect(field(s, 'review', 'message')).toBe('App');
    expect(field(s, 'review', 'label')).toBe('Manager review');
    s.undo();
    expect(field(s, 'review', 'message')).toBe('{{ summary }}. Approve?');
  });

  it('drops the redo steps after a new edit', () => {
    const s = store();
    s.setNodeField('review', 'label', 'One');
    s.undo();
    s.setNodeField('review', 'label', 'Two');
    s.redo();
    expect(field(s, 'review', 'label')).toBe('Two');
  });
});

describe('dirty marker', () => {
  it('is clean after opening, dirty after an edit, clean again after undoing it', () => {
    const s = store();
    expect(s.getSnapshot().dirty).toBe(false);
    s.setNodeField('review', 'label', 'Boss');
    expect(s.getSnapshot().dirty).toBe(true);
    s.undo();
    expect(s.getSnapshot().dirty).toBe(false);
  });

  it('measures against the last save', () => {
    const s = store();
    s.setNodeField('review', 'label', 'Boss');
    s.markSaved('/flows/copy.json');
    expect(s.getSnapshot().dirty).toBe(false);
    expect(s.getSnapshot().path).toBe('/flows/copy.json');
    s.setNodeField('review', 'label', 'Chief');
    expect(s.getSnapshot().dirty).toBe(true);
    s.undo();
    expect(s.getSnapshot().dirty).toBe(false);
    // Back before the save: differs from the file again.
    s.undo();
    expect(s.getSnapshot().dirty).toBe(true);
  });

  it('is clean after loading another flow, with no history', () => {
    const s = store();
    s.setNodeField('review', 'label', 'Boss');
    s.load(offlineFlow(), '/other.json');
    expect(s.getSnapshot().dirty).toBe(false);
    expect(s.getSnapshot().canUndo).toBe(false);
  });
});

describe('drag', () => {
  it('makes a whole drag one history step', () => {
    const s = store();
    s.moveNodes([{ id: 'summary', x: 250, y: 110 }], true);
    s.moveNodes([{ id: 'summary', x: 300, y: 150 }], true);
    s.moveNodes([{ id: 'summary', x: 320.4, y: 170.6 }], true);
    expect(s.getSnapshot().canUndo).toBe(false);
    s.moveNodes([{ id: 'summary', x: 320.4, y: 170.6 }], false);
    expect(s.getSnapshot().flow.nodes[1].position).toEqual({ x: 320, y: 171 });
    expect(s.getSnapshot().canUndo).toBe(true);
    s.undo();
    expect(s.getSnapshot().flow.nodes[1].position).toEqual({ x: 240, y: 100 });
    expect(s.getSnapshot().canUndo).toBe(false);
    expect(s.getSnapshot().dirty).toBe(false);
  });

  it('adds no step for a click on a node', () => {
    const s = store();
    s.moveNodes([{ id: 'summary', x: 240, y: 100 }], false);
    expect(s.getSnapshot().canUndo).toBe(false);
  });
});

describe('delete', () => {
  it('removes a node together with its edges, as one step', () => {
    const s = store();
    s.select(['review'], []);
    s.deleteSelection();
    const { flow } = s.getSnapshot();
    expect(flow.nodes.map((node) => node.id)).not.toContain('review');
    expect(flow.edges.some((edge) => edge.source === 'review' || edge.target === 'review')).toBe(false);
    expect(flow.edges).toHaveLength(6);
    expect(s.getSnapshot().selection.nodes).toEqual([]);
    s.undo();
    expect(s.getSnapshot().flow.edges).toHaveLength(9);
  });

  it('removes selected edges only', () => {
    const s = store();
    s.select([], ['large-false-auto']);
    s.deleteSelection();
    expect(s.getSnapshot().flow.nodes).toHaveLength(8);
    expect(s.getSnapshot().flow.edges.map((edge) => edge.id)).not.toContain('large-false-auto');
  });
});

describe('copy and paste', () => {
  it('pastes the selection with new ids and selects the copies', () => {
    const s = store();
    s.select(['refunded', 'result'], []);
    expect(s.copy()).toBe(2);
    const first = s.paste();
    expect(first).toEqual(['template-1', 'output-1']);
    expect(s.getSnapshot().selection.nodes).toEqual(first);
    expect(s.getSnapshot().flow.edges.at(-1)).toMatchObject({ source: 'template-1', target: 'output-1' });
    const second = s.paste();
    expect(second).toEqual(['template-2', 'output-2']);
    const positions = s.getSnapshot().flow.nodes.slice(-2).map((node) => node.position);
    expect(positions).toEqual([
      { x: 1040, y: 20 },
      { x: 1280, y: 180 },
    ]);
    s.undo();
    s.undo();
    expect(s.getSnapshot().flow.nodes).toHaveLength(8);
  });

  it('pastes nothing before anything was copied', () => {
    const s = store();
    expect(s.paste()).toEqual([]);
    expect(s.getSnapshot().canUndo).toBe(false);
  });
});

describe('connect', () => {
  it('writes both handles and names the edge after its ends', () => {
    const s = store();
    expect(s.connect({ source: 'auto', sourceHandle: null, target: 'declined', targetHandle: null })).toBe('auto-output-declined');
    expect(s.getSnapshot().flow.edges.at(-1)).toEqual({
      id: 'auto-output-declined',
      source: 'auto',
      target: 'declined',
      sourceHandle: 'output',
      targetHandle: 'input',
    });
  });

  it('ignores a connection that is already there', () => {
    const s = store();
    expect(s.connect({ source: 'start', sourceHandle: 'output', target: 'summary', targetHandle: 'input' })).toBeNull();
    expect(s.getSnapshot().flow.edges).toHaveLength(9);
  });

  it('gives a second edge between the same handles of other ends its own id', () => {
    const s = store();
    s.connect({ source: 'large', sourceHandle: 'condition-0', target: 'auto' });
    s.connect({ source: 'large', sourceHandle: 'condition-0', target: 'declined' });
    expect(s.getSnapshot().flow.edges.slice(-2).map((edge) => edge.id)).toEqual([
      'large-condition-0-auto',
      'large-condition-0-declined',
    ]);
  });
});

describe('selection', () => {
  it('selects everything and follows xyflow select changes', () => {
    const s = store();
    s.selectAll();
    expect(s.getSnapshot().selection.nodes).toHaveLength(8);
    expect(s.getSnapshot().selection.edges).toHaveLength(9);
    s.select([], []);
    s.applySelectionChanges([{ id: 'start', selected: true }], []);
    s.applySelectionChanges([{ id: 'summary', selected: true }], []);
    s.applySelectionChanges([{ id: 'start', selected: false }], []);
    expect(s.getSnapshot().selection.nodes).toEqual(['summary']);
  });
});
