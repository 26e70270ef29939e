// The flow being edited, with its selection, undo history, dirty state and clipboard.
// Framework-free (React reads it through useSyncExternalStore), so its rules are unit-tested
// without a DOM: one history step per user action, typing into one field is one step, a
// drag is one step at its end, and "dirty" means "differs from the file as last saved".

import type { Flow, Value } from './bindings';
import {
  canonicalJson,
  canvasFlow,
  type CanvasFlow,
  copyNodes,
  newEdgeId,
  newNodeId,
  pasteNodes,
  removeElements,
  setPath,
  sourceHandleOf,
  DEFAULT_SOURCE_HANDLE,
  DEFAULT_TARGET_HANDLE,
  type Clipboard,
  type FlowEdge,
  type FlowNode,
  type JsonValue,
  type NodeData,
} from './flowMapping';

export interface Selection {
  nodes: readonly string[];
  edges: readonly string[];
}

export interface CanvasState {
  flow: CanvasFlow;
  /** The file the flow was opened from or saved to; `null` for a new flow. */
  path: string | null;
  /** The flow differs from the file as last opened or saved. */
  dirty: boolean;
  selection: Selection;
  canUndo: boolean;
  canRedo: boolean;
  canPaste: boolean;
  /** Counts flows loaded (opened, new): the canvas fits the view to each new one. */
  loads: number;
}

export interface Connection {
  source: string;
  sourceHandle?: string | null;
  target: string;
  targetHandle?: string | null;
}

/** How many steps back undo reaches. */
const HISTORY_LIMIT = 200;

const NO_SELECTION: Selection = { nodes: [], edges: [] };

/** A flow with just a start node: what New gives. */
export function emptyFlow(startData: NodeData = {}): CanvasFlow {
  return {
    version: 1,
    name: '',
    nodes: [{ id: 'start', type: 'start', position: { x: 0, y: 0 }, data: startData } as FlowNode],
    edges: [],
  } as CanvasFlow;
}

export class CanvasStore {
  private state: CanvasState;
  private past: CanvasFlow[] = [];
  private future: CanvasFlow[] = [];
  private savedJson: string;
  /** The kind of the last edit, when consecutive edits of that kind make one history step. */
  private coalesceKey: string | null = null;
  /** The flow before the drag going on now, pushed to the history when the drag ends. */
  private dragStart: CanvasFlow | null = null;
  private clipboard: Clipboard | null = null;
  private loads = 0;
  private listeners = new Set<() => void>();

  constructor(flow: Flow = emptyFlow(), path: string | null = null) {
    const held = canvasFlow(flow);
    this.savedJson = canonicalJson(held);
    this.state = this.makeState(held, path, NO_SELECTION);
  }

  subscribe = (listener: () => void): (() => void) => {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  };

  getSnapshot = (): CanvasState => this.state;

  // --- file -----------------------------------------------------------------------------

  /** Replaces the flow with one just opened (or a new one): no history, not dirty. */
  load(opened: Flow, path: string | null): void {
    const flow = canvasFlow(opened);
    this.past = [];
    this.future = [];
    this.coalesceKey = null;
    this.dragStart = null;
    this.savedJson = canonicalJson(flow);
    this.loads += 1;
    this.set(this.makeState(flow, path, NO_SELECTION));
  }

  /** The flow `flow` (the one sent to be saved) is now in the file at `path`. */
  markSaved(path: string, flow: CanvasFlow = this.state.flow): void {
    this.savedJson = canonicalJson(flow);
    this.coalesceKey = null;
    this.set(this.makeState(this.state.flow, path, this.state.selection));
  }

  // --- edits ----------------------------------------------------------------------------

  /**
   * Applies `recipe` to the flow as one history step, or as part of the previous step when
   * both carry the same `coalesce` key (typing into one field).
   */
  update(recipe: (flow: CanvasFlow) => CanvasFlow, coalesce: string | null = null): void {
    const before = this.state.flow;
    const after = recipe(before);
    if (after === before) return;
    if (coalesce === null || coalesce !== this.coalesceKey) this.pushHistory(before);
    this.coalesceKey = coalesce;
    this.future = [];
    this.set(this.makeState(after, this.state.path, this.liveSelection(after, this.state.selection)));
  }

  setNodeField(nodeId: string, name: string, value: JsonValue | undefined): void {
    this.update(
      (flow) => mapNode(flow, nodeId, (node) => ({ ...node, data: setPath(node.data ?? {}, name, value) })),
      `field:${nodeId}:${name}`,
    );
  }

  setFlowName(name: string): void {
    this.update((flow) => (flow.name === name ? flow : { ...flow, name }), 'flow-name');
  }

  /** Sets (or, with `undefined`, removes) one of the flow's `settings`, as one undoable step. */
  setFlowSetting(key: string, value: Value | undefined): void {
    this.update((flow) => {
      const settings = { ...(flow.settings ?? {}) };
      if (JSON.stringify(settings[key]) === JSON.stringify(value)) return flow;
      if (value === undefined) delete settings[key];
      else settings[key] = value;
      return { ...flow, settings };
    });
  }

  /** Adds a node of `kind` with `data` at `position`, selects it and returns its id. */
  addNode(kind: string, data: NodeData, position: { x: number; y: number }): string {
    const node = this.newNode(kind, data, position);
    this.update((flow) => ({ ...flow, nodes: [...flow.nodes, node] }));
    this.select([node.id], []);
    return node.id;
  }

  /** A node of `kind` with an id not yet in the flow, at `position` rounded as files keep it. */
  private newNode(kind: string, data: NodeData, position: { x: number; y: number }): FlowNode {
    const id = newNodeId(kind, new Set(this.state.flow.nodes.map((node) => node.id)));
    return {
      id,
      type: kind,
      position: { x: Math.round(position.x), y: Math.round(position.y) },
      data,
    } as FlowNode;
  }

  /**
   * Adds a node of `kind` at `position`, wired from the handle a connection was dragged out
   * of (`from`): one step of the history, as a person sees it.
   */
  addConnectedNode(
    kind: string,
    data: NodeData,
    position: { x: number; y: number },
    from: { source: string; sourceHandle: string | null },
  ): string {
    const node = this.newNode(kind, data, position);
    const id = node.id;
    const sourceHandle = from.sourceHandle || DEFAULT_SOURCE_HANDLE;
    const edge = {
      id: newEdgeId(from.source, sourceHandle, id, new Set(this.state.flow.edges.map((candidate) => candidate.id))),
      source: from.source,
      target: id,
      sourceHandle,
      targetHandle: DEFAULT_TARGET_HANDLE,
    } as FlowEdge;
    this.update((flow) => ({ ...flow, nodes: [...flow.nodes, node], edges: [...flow.edges, edge] }));
    this.select([id], []);
    return id;
  }

  /**
   * Adds an edge for a connection drawn on the canvas; its handles are always written out.
   * Returns the edge id, or null when the very same edge is already there. Whether the edge
   * is allowed is the validator's call, not the canvas's.
   */
  connect(connection: Connection): string | null {
    const sourceHandle = connection.sourceHandle || DEFAULT_SOURCE_HANDLE;
    const targetHandle = connection.targetHandle || DEFAULT_TARGET_HANDLE;
    const flow = this.state.flow;
    const duplicate = flow.edges.some(
      (edge) =>
        edge.source === connection.source &&
        edge.target === connection.target &&
        sourceHandleOf(edge) === sourceHandle &&
        (edge.targetHandle ?? DEFAULT_TARGET_HANDLE) === targetHandle,
    );
    if (duplicate) return null;
    const id = newEdgeId(
      connection.source,
      sourceHandle,
      connection.target,
      new Set(flow.edges.map((edge) => edge.id)),
    );
    const edge = {
      id,
      source: connection.source,
      target: connection.target,
      sourceHandle,
      targetHandle,
    } as FlowEdge;
    this.update((current) => ({ ...current, edges: [...current.edges, edge] }));
    return id;
  }

  /**
   * Moves nodes while they are dragged. Moves with `dragging` true change the flow without
   * a history step; the move that ends the drag makes the whole drag one step.
   */
  moveNodes(moves: { id: string; x: number; y: number }[], dragging: boolean): void {
    const before = this.state.flow;
    if (dragging && this.dragStart === null) this.dragStart = before;
    const byId = new Map(moves.map((move) => [move.id, move]));
    const after: CanvasFlow = {
      ...before,
      nodes: before.nodes.map((node) => {
        const move = byId.get(node.id);
        if (!move) return node;
        const x = Math.round(move.x);
        const y = Math.round(move.y);
        if (node.position?.x === x && node.position?.y === y) return node;
        return { ...node, position: { x, y } };
      }),
    };
    const moved = after.nodes.some((node, index) => node !== before.nodes[index]);
    const flow = moved ? after : before;
    if (!dragging) {
      const start = this.dragStart ?? before;
      this.dragStart = null;
      if (flow === start || canonicalJson(start.nodes) === canonicalJson(flow.nodes)) {
        // A click on a node, or a drag back to where it started: nothing to undo.
        if (flow !== this.state.flow) this.set(this.makeState(flow, this.state.path, this.state.selection));
        return;
      }
      this.pushHistory(start);
      this.coalesceKey = null;
      this.future = [];
      // The flow is already where the drag left it; what changes is that it can be undone.
      this.set(this.makeState(flow, this.state.path, this.state.selection));
      return;
    }
    if (flow !== this.state.flow) this.set(this.makeState(flow, this.state.path, this.state.selection));
  }

  /** Moves nodes to `positions` (rounded as files keep them) as one step: a tidy-up. */
  placeNodes(positions: ReadonlyMap<string, { x: number; y: number }>): void {
    this.update((flow) => {
      let moved = false;
      const nodes = flow.nodes.map((node) => {
        const place = positions.get(node.id);
        if (!place) return node;
        const x = Math.round(place.x);
        const y = Math.round(place.y);
        if (node.position?.x === x && node.position?.y === y) return node;
        moved = true;
        return { ...node, position: { x, y } };
      });
      return moved ? { ...flow, nodes } : flow;
    });
  }

  /** Removes the selected nodes and edges (and every edge of a removed node). */
  deleteSelection(): void {
    const { nodes, edges } = this.state.selection;
    this.deleteElements(nodes, edges);
  }

  deleteElements(nodeIds: readonly string[], edgeIds: readonly string[]): void {
    if (nodeIds.length === 0 && edgeIds.length === 0) return;
    this.update((flow) => removeElements(flow, nodeIds, edgeIds));
  }

  // --- selection ------------------------------------------------------------------------

  select(nodes: readonly string[], edges: readonly string[]): void {
    const selection = this.liveSelection(this.state.flow, { nodes, edges });
    if (sameSelection(selection, this.state.selection)) return;
    this.set({ ...this.state, selection });
  }

  /** Applies xyflow's `select` changes (click, shift-click, box select). */
  applySelectionChanges(
    nodeChanges: { id: string; selected: boolean }[],
    edgeChanges: { id: string; selected: boolean }[],
  ): void {
    const nodes = new Set(this.state.selection.nodes);
    const edges = new Set(this.state.selection.edges);
    for (const change of nodeChanges) {
      if (change.selected) nodes.add(change.id);
      else nodes.delete(change.id);
    }
    for (const change of edgeChanges) {
      if (change.selected) edges.add(change.id);
      else edges.delete(change.id);
    }
    this.select([...nodes], [...edges]);
  }

  selectAll(): void {
    const { flow } = this.state;
    this.select(
      flow.nodes.map((node) => node.id),
      flow.edges.map((edge) => edge.id),
    );
  }

  // --- clipboard ------------------------------------------------------------------------

  /** Copies the selected nodes and the edges among them. Returns how many nodes. */
  copy(): number {
    const clipboard = copyNodes(this.state.flow, this.state.selection.nodes);
    if (clipboard.nodes.length === 0) return 0;
    this.clipboard = clipboard;
    this.set({ ...this.state, canPaste: true });
    return clipboard.nodes.length;
  }

  /** Pastes the clipboard (fresh ids, moved by 40 px) and selects what was pasted. */
  paste(): string[] {
    const clipboard = this.clipboard;
    if (!clipboard) return [];
    const { flow, nodeIds, edgeIds } = pasteNodes(this.state.flow, clipboard);
    this.update(() => flow);
    // The next paste lands another step further, not on top of this one.
    this.clipboard = copyNodes(flow, nodeIds);
    this.select(nodeIds, edgeIds);
    return nodeIds;
  }

  // --- history --------------------------------------------------------------------------

  undo(): void {
    const previous = this.past.pop();
    if (!previous) return;
    this.future.push(this.state.flow);
    this.coalesceKey = null;
    this.set(this.makeState(previous, this.state.path, this.liveSelection(previous, this.state.selection)));
  }

  redo(): void {
    const next = this.future.pop();
    if (!next) return;
    this.past.push(this.state.flow);
    this.coalesceKey = null;
    this.set(this.makeState(next, this.state.path, this.liveSelection(next, this.state.selection)));
  }

  // --- internals ------------------------------------------------------------------------

  private pushHistory(flow: CanvasFlow): void {
    this.past.push(flow);
    if (this.past.length > HISTORY_LIMIT) this.past.shift();
  }

  private makeState(flow: CanvasFlow, path: string | null, selection: Selection): CanvasState {
    return {
      flow,
      path,
      dirty: canonicalJson(flow) !== this.savedJson,
      selection,
      canUndo: this.past.length > 0,
      canRedo: this.future.length > 0,
      canPaste: this.clipboard !== null,
      loads: this.loads,
    };
  }

  /** `selection` without ids that no longer exist in `flow`. */
  private liveSelection(flow: CanvasFlow, selection: Selection): Selection {
    const nodeIds = new Set(flow.nodes.map((node) => node.id));
    const edgeIds = new Set(flow.edges.map((edge) => edge.id));
    const live = {
      nodes: selection.nodes.filter((id) => nodeIds.has(id)),
      edges: selection.edges.filter((id) => edgeIds.has(id)),
    };
    return sameSelection(live, selection) ? selection : live;
  }

  private set(state: CanvasState): void {
    this.state = state;
    for (const listener of [...this.listeners]) listener();
  }
}

function mapNode(flow: CanvasFlow, nodeId: string, recipe: (node: FlowNode) => FlowNode): CanvasFlow {
  let changed = false;
  const nodes = flow.nodes.map((node) => {
    if (node.id !== nodeId) return node;
    const updated = recipe(node);
    if (canonicalJson(updated) !== canonicalJson(node)) changed = true;
    return changed ? updated : node;
  });
  return changed ? { ...flow, nodes } : flow;
}

function sameSelection(a: Selection, b: Selection): boolean {
  return (
    a.nodes.length === b.nodes.length &&
    a.edges.length === b.edges.length &&
    a.nodes.every((id, i) => id === b.nodes[i]) &&
    a.edges.every((id, i) => id === b.edges[i])
  );
}
