// The flow file (the engine's `Flow`, exactly as `openFlow` returns it) is the one source of
// truth; xyflow's nodes and edges are derived from it for drawing, and every edit is written
// back into the flow. Fields the canvas does not know (on the flow, its nodes, edges and
// `data`) therefore survive any round trip untouched.

import type { Edge as XyEdge, Node as XyNode } from '@xyflow/react';
import { MarkerType } from '@xyflow/react';
import type { Edge as FlowEdge, Flow, Node as FlowNode } from './bindings';

export type { FlowEdge, FlowNode };
export type NodeData = NonNullable<FlowNode['data']>;
export type JsonValue = NodeData[string];

/**
 * A flow as the canvas holds it: with its `nodes` and `edges` lists. The generated `Flow`
 * type has them optional (a file may leave them out; they default to empty), so every flow
 * coming from a command passes through `canvasFlow` once.
 */
export type CanvasFlow = Flow & { nodes: FlowNode[]; edges: FlowEdge[] };

export function canvasFlow(flow: Flow): CanvasFlow {
  return { ...flow, nodes: flow.nodes ?? [], edges: flow.edges ?? [] };
}

/** What a drawn node carries: the flow's node itself (kept by reference). */
export type CanvasNodeData = { node: FlowNode };
export type CanvasNode = XyNode<CanvasNodeData>;
export type CanvasEdge = XyEdge;

/** The handle an edge leaves by when the file leaves it out. */
export const DEFAULT_SOURCE_HANDLE = 'output';
/** The handle an edge enters by when the file leaves it out (the only one there is). */
export const DEFAULT_TARGET_HANDLE = 'input';
/** The handle whose edges make the target agent a tool of the source (docs/kinds.md). */
export const SUBAGENT_HANDLE = 'subagent';
/** The xyflow node type used for a kind the catalog does not know. */
export const FALLBACK_NODE_TYPE = 'unknown';

export function sourceHandleOf(edge: FlowEdge): string {
  return edge.sourceHandle ?? DEFAULT_SOURCE_HANDLE;
}

export function isSubagentEdge(edge: FlowEdge): boolean {
  return sourceHandleOf(edge) === SUBAGENT_HANDLE;
}

// ---------------------------------------------------------------------------------------
// Nested data paths: a field named `tools.web_search` is `data.tools.web_search`.

function isPlainObject(value: unknown): value is Record<string, JsonValue> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

export function getPath(data: NodeData | undefined, path: string): JsonValue | undefined {
  let current: unknown = data;
  for (const key of path.split('.')) {
    if (!isPlainObject(current)) return undefined;
    current = current[key];
  }
  return current as JsonValue | undefined;
}

/**
 * A copy of `data` with `path` set to `value`; `undefined` removes the key (and objects the
 * removal leaves empty, so clearing `retry.maxAttempts` does not leave `retry: {}` behind).
 */
export function setPath(data: NodeData, path: string, value: JsonValue | undefined): NodeData {
  const [key, ...rest] = path.split('.');
  const copy: NodeData = { ...data };
  if (rest.length === 0) {
    if (value === undefined) delete copy[key];
    else copy[key] = value;
    return copy;
  }
  const child = isPlainObject(copy[key]) ? (copy[key] as NodeData) : {};
  const updated = setPath(child, rest.join('.'), value);
  if (Object.keys(updated).length === 0) delete copy[key];
  else copy[key] = updated;
  return copy;
}

// ---------------------------------------------------------------------------------------
// Ids.

/**
 * A fresh node id for `kind`: `<kind>-<n>` with the smallest unused n ≥ 1; the start node is
 * simply `start` while that is free (the id every example flow uses).
 */
export function newNodeId(kind: string, taken: ReadonlySet<string>): string {
  if (kind === 'start' && !taken.has('start')) return 'start';
  for (let n = 1; ; n += 1) {
    const id = `${kind}-${n}`;
    if (!taken.has(id)) return id;
  }
}

/** `<source>-<sourceHandle>-<target>`, the engine's own naming, made unique with `-2`, `-3`… */
export function newEdgeId(
  source: string,
  sourceHandle: string,
  target: string,
  taken: ReadonlySet<string>,
): string {
  const base = `${source}-${sourceHandle}-${target}`;
  if (!taken.has(base)) return base;
  for (let n = 2; ; n += 1) {
    const id = `${base}-${n}`;
    if (!taken.has(id)) return id;
  }
}

// ---------------------------------------------------------------------------------------
// Flow → xyflow.

/** Per-node decorations the canvas adds on top of the flow. */
export interface NodeView {
  selected: ReadonlySet<string>;
  measured: ReadonlyMap<string, { width: number; height: number }>;
  /** Kinds the catalog describes; others are drawn by the fallback node type. */
  knownKinds: ReadonlySet<string>;
  /** Nodes drawn above the others (one showing an approval prompt, which makes it taller). */
  raised?: ReadonlySet<string>;
}

/** The z-index of raised nodes: above xyflow's selected nodes (1000). */
const RAISED_Z = 1001;

// Drawn nodes are cached per flow node so that unchanged nodes keep their identity and
// xyflow (and the memoized node component) skip them on every re-derivation, e.g. while one
// node is dragged in a large flow.
const nodeCache = new WeakMap<FlowNode, CanvasNode>();

export function toCanvasNodes(flow: CanvasFlow, view: NodeView): CanvasNode[] {
  return flow.nodes.map((node) => {
    const selected = view.selected.has(node.id);
    const measured = view.measured.get(node.id);
    const type = view.knownKinds.has(node.type) ? node.type : FALLBACK_NODE_TYPE;
    const zIndex = view.raised?.has(node.id) ? RAISED_Z : undefined;
    const cached = nodeCache.get(node);
    if (
      cached &&
      cached.selected === selected &&
      cached.type === type &&
      cached.zIndex === zIndex &&
      cached.measured?.width === measured?.width &&
      cached.measured?.height === measured?.height
    ) {
      return cached;
    }
    const drawn: CanvasNode = {
      id: node.id,
      type,
      position: { x: node.position?.x ?? 0, y: node.position?.y ?? 0 },
      // The same data while the node is the same: a node measured or selected anew is drawn
      // again for that alone, not because its data looks new (GenericNode compares it).
      data: cached?.data ?? { node },
      selected,
      className: `kind-${node.type}`,
      ...(measured ? { measured } : {}),
      ...(zIndex !== undefined ? { zIndex } : {}),
    };
    nodeCache.set(node, drawn);
    return drawn;
  });
}

/** Per-edge decorations the canvas adds on top of the flow. */
export interface EdgeView {
  selected: ReadonlySet<string>;
  /** Edges a validation problem names. */
  invalid: ReadonlySet<string>;
  /** Edges execution is flowing along right now (animated). */
  active: ReadonlySet<string>;
  /** Edges the shown run went along. */
  traversed: ReadonlySet<string>;
  /** Source handles that are error handles, as `<nodeId>/<handleId>`. */
  errorHandles?: ReadonlySet<string>;
}

export function toCanvasEdges(flow: CanvasFlow, view: EdgeView): CanvasEdge[] {
  return flow.edges.map((edge) => {
    const sourceHandle = sourceHandleOf(edge);
    const subagent = sourceHandle === SUBAGENT_HANDLE;
    const classes = [subagent ? 'edge-subagent' : 'edge-execution'];
    if (view.errorHandles?.has(`${edge.source}/${sourceHandle}`)) classes.push('edge-error');
    if (view.invalid.has(edge.id)) classes.push('invalid');
    if (view.traversed.has(edge.id)) classes.push('traversed');
    const drawn: CanvasEdge = {
      id: edge.id,
      source: edge.source,
      target: edge.target,
      sourceHandle,
      targetHandle: edge.targetHandle ?? DEFAULT_TARGET_HANDLE,
      selected: view.selected.has(edge.id),
      animated: view.active.has(edge.id),
      className: classes.join(' '),
    };
    if (subagent) {
      // A subagent edge is a tool relation, not a step of the run: no arrow, a label.
      drawn.label = 'tool';
    } else {
      drawn.markerEnd = { type: MarkerType.ArrowClosed, width: 18, height: 18 };
    }
    return drawn;
  });
}

/**
 * Writes drawn nodes and edges back into `flow`: positions of known nodes change, new ones
 * are added, missing ones removed; everything else of each flow node and edge is kept.
 */
export function fromCanvas(flow: CanvasFlow, nodes: CanvasNode[], edges: CanvasEdge[]): CanvasFlow {
  const nodesById = new Map(flow.nodes.map((node) => [node.id, node]));
  const edgesById = new Map(flow.edges.map((edge) => [edge.id, edge]));
  return {
    ...flow,
    nodes: nodes.map((drawn) => {
      const node = nodesById.get(drawn.id) ?? drawn.data.node;
      const x = drawn.position.x;
      const y = drawn.position.y;
      if (node.position?.x === x && node.position?.y === y) return node;
      return { ...node, position: { x, y } };
    }),
    edges: edges.map((drawn) => {
      const known = edgesById.get(drawn.id);
      if (known) return known;
      return {
        id: drawn.id,
        source: drawn.source,
        target: drawn.target,
        sourceHandle: drawn.sourceHandle ?? DEFAULT_SOURCE_HANDLE,
        targetHandle: drawn.targetHandle ?? DEFAULT_TARGET_HANDLE,
      } as FlowEdge;
    }),
  };
}

// ---------------------------------------------------------------------------------------
// Copy and paste.

export interface Clipboard {
  nodes: FlowNode[];
  /** Only edges whose both ends were copied. */
  edges: FlowEdge[];
}

export function copyNodes(flow: CanvasFlow, nodeIds: Iterable<string>): Clipboard {
  const ids = new Set(nodeIds);
  return {
    nodes: flow.nodes.filter((node) => ids.has(node.id)),
    edges: flow.edges.filter((edge) => ids.has(edge.source) && ids.has(edge.target)),
  };
}

/** How far a pasted node lands from the node it was copied from. */
export const PASTE_OFFSET = 40;

/**
 * Adds the clipboard's nodes with fresh ids, moved by `offset`, and the copied edges among
 * them with fresh ids pointing at the new nodes. Returns the new flow and the new node ids.
 */
export function pasteNodes(
  flow: CanvasFlow,
  clipboard: Clipboard,
  offset = PASTE_OFFSET,
): { flow: CanvasFlow; nodeIds: string[]; edgeIds: string[] } {
  const takenNodes = new Set(flow.nodes.map((node) => node.id));
  const renamed = new Map<string, string>();
  const nodes = clipboard.nodes.map((node) => {
    // A pasted start would make the flow invalid twice over; it still gets a fresh id.
    const id = newNodeId(node.type, takenNodes);
    takenNodes.add(id);
    renamed.set(node.id, id);
    const position = { x: (node.position?.x ?? 0) + offset, y: (node.position?.y ?? 0) + offset };
    return { ...node, id, position, data: structuredClone(node.data ?? {}) } as FlowNode;
  });
  const takenEdges = new Set(flow.edges.map((edge) => edge.id));
  const edges = clipboard.edges.map((edge) => {
    const source = renamed.get(edge.source) ?? edge.source;
    const target = renamed.get(edge.target) ?? edge.target;
    const id = newEdgeId(source, sourceHandleOf(edge), target, takenEdges);
    takenEdges.add(id);
    return { ...edge, id, source, target } as FlowEdge;
  });
  return {
    flow: { ...flow, nodes: [...flow.nodes, ...nodes], edges: [...flow.edges, ...edges] },
    nodeIds: nodes.map((node) => node.id),
    edgeIds: edges.map((edge) => edge.id),
  };
}

/** The flow without `nodeIds` and `edgeIds`, and without every edge touching a removed node. */
export function removeElements(
  flow: CanvasFlow,
  nodeIds: Iterable<string>,
  edgeIds: Iterable<string>,
): CanvasFlow {
  const nodes = new Set(nodeIds);
  const edges = new Set(edgeIds);
  return {
    ...flow,
    nodes: flow.nodes.filter((node) => !nodes.has(node.id)),
    edges: flow.edges.filter(
      (edge) => !edges.has(edge.id) && !nodes.has(edge.source) && !nodes.has(edge.target),
    ),
  };
}

/**
 * The flow's content as comparable text: keys sorted, so that two flows equal in content
 * compare equal whatever order their keys were written in.
 */
export function canonicalJson(value: unknown): string {
  return JSON.stringify(value, (_key, inner: unknown) => {
    if (!isPlainObject(inner)) return inner;
    const sorted: Record<string, unknown> = {};
    for (const key of Object.keys(inner).sort()) sorted[key] = inner[key];
    return sorted;
  });
}
