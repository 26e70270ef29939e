import { describe, expect, it } from 'vitest';
import { handlesOf, kindOf } from './catalog';
import {
  copyNodes,
  fromCanvas,
  getPath,
  newEdgeId,
  newNodeId,
  pasteNodes,
  setPath,
  toCanvasEdges,
  toCanvasNodes,
  type CanvasFlow,
  type NodeData,
} from './flowMapping';
import { catalog, offlineFlow } from './test/fixtures';

const noDecorations = {
  selected: new Set<string>(),
  invalid: new Set<string>(),
  active: new Set<string>(),
  traversed: new Set<string>(),
};
const nodeView = { selected: new Set<string>(), measured: new Map(), knownKinds: new Set(['start', 'agent', 'if']) };

function flowWithExtras(): CanvasFlow {
  return {
    version: 1,
    name: 'Extras',
    settings: { vars: { tone: 'dry' } },
    author: 'someone',
    nodes: [
      { id: 'start', type: 'start', position: { x: 0, y: 0 }, data: { initialInput: 'hi' }, width: 180 },
      {
        id: 'a',
        type: 'agent',
        position: { x: 240, y: 0 },
        data: { label: 'A', custom: { nested: [1, 2] }, tools: { web_search: true } },
      },
      { id: 'mystery', type: 'fromTheFuture', position: { x: 480, y: 0 }, data: { anything: true } },
    ],
    edges: [
      { id: 'e1', source: 'start', target: 'a' },
      { id: 'e2', source: 'a', target: 'mystery', sourceHandle: 'error', targetHandle: 'input', note: 'kept' },
    ],
  } as unknown as CanvasFlow;
}

describe('Flow ⇄ canvas', () => {
  it('keeps unknown fields, data and omitted handles through a round trip', () => {
    const flow = flowWithExtras();
    const back = fromCanvas(flow, toCanvasNodes(flow, nodeView), toCanvasEdges(flow, noDecorations));
    expect(back).toEqual(flow);
    // The edge that left its handles out still leaves them out (the file does not change).
    expect(back.edges[0]).not.toHaveProperty('sourceHandle');
  });

  it('writes a moved node back with only its position changed', () => {
    const flow = flowWithExtras();
    const nodes = toCanvasNodes(flow, nodeView).map((node) =>
      node.id === 'a' ? { ...node, position: { x: 300, y: 50 } } : node,
    );
    const back = fromCanvas(flow, nodes, toCanvasEdges(flow, noDecorations));
    expect(back.nodes[1]).toEqual({ ...flow.nodes[1], position: { x: 300, y: 50 } });
    expect(back.nodes[0]).toBe(flow.nodes[0]);
    expect((back as Record<string, unknown>).author).toBe('someone');
  });

  it('keeps the data of a node measured or selected anew while the node is the same', () => {
    const flow = flowWithExtras();
    const first = toCanvasNodes(flow, nodeView);
    const measured = toCanvasNodes(flow, { ...nodeView, measured: new Map([['a', { width: 200, height: 90 }]]) });
    const selected = toCanvasNodes(flow, { ...nodeView, selected: new Set(['a']) });
    expect(measured[1]).not.toBe(first[1]);
    expect(measured[1].measured).toEqual({ width: 200, height: 90 });
    expect(measured[1].data).toBe(first[1].data);
    expect(selected[1].selected).toBe(true);
    expect(selected[1].data).toBe(first[1].data);
    // An edited node is another node: its data is new.
    const edited = { ...flow, nodes: flow.nodes.map((node) => (node.id === 'a' ? { ...node, data: { ...node.data, model: 'other' } } : node)) };
    expect(toCanvasNodes(edited, nodeView)[1].data).not.toBe(first[1].data);
  });

  it('draws kinds the catalog does not know with the fallback type', () => {
    const nodes = toCanvasNodes(flowWithExtras(), nodeView);
    expect(nodes.map((node) => node.type)).toEqual(['start', 'agent', 'unknown']);
  });

  it('draws an edge without handles as leaving by output and entering by input', () => {
    const [edge] = toCanvasEdges(flowWithExtras(), noDecorations);
    expect(edge.sourceHandle).toBe('output');
    expect(edge.targetHandle).toBe('input');
  });
});

describe('handles', () => {
  it('gives an if node one handle per condition row, then false', () => {
    const data = {
      conditions: [
        { operator: 'contains', value: 'refund' },
        { field: 'amount', operator: 'gt', value: 100 },
      ],
    } as unknown as NodeData;
    const handles = handlesOf(kindOf(catalog, 'if'), data);
    expect(handles.map((handle) => handle.id)).toEqual(['condition-0', 'condition-1', 'false']);
    expect(handles[0].label).toBe('contains refund');
    expect(handles[1].label).toBe('amount gt 100');
  });

  it('gives an if node without conditions only the false handle', () => {
    expect(handlesOf(kindOf(catalog, 'if'), {}).map((handle) => handle.id)).toEqual(['false']);
  });

  it('gives agents a subagent handle and an error handle besides output', () => {
    const handles = handlesOf(kindOf(catalog, 'agent'), {});
    expect(handles.map((handle) => [handle.id, handle.kind])).toEqual([
      ['output', 'execution'],
      ['subagent', 'subagent'],
      ['error', 'error'],
    ]);
  });
});

describe('edge styling', () => {
  const flow = {
    version: 1,
    name: '',
    nodes: [],
    edges: [
      { id: 'run', source: 'lead', target: 'out', sourceHandle: 'output' },
      { id: 'tool', source: 'lead', target: 'helper', sourceHandle: 'subagent', targetHandle: 'input' },
      { id: 'oops', source: 'lead', target: 'fix', sourceHandle: 'error' },
    ],
  } as unknown as CanvasFlow;

  it('draws subagent edges as dashed tool relations without an arrow', () => {
    const [execution, tool] = toCanvasEdges(flow, noDecorations);
    expect(tool.className).toContain('edge-subagent');
    expect(tool.markerEnd).toBeUndefined();
    expect(tool.label).toBe('tool');
    expect(execution.className).toContain('edge-execution');
    expect(execution.className).not.toContain('edge-subagent');
    expect(execution.markerEnd).toBeDefined();
    expect(execution.label).toBeUndefined();
  });

  it('marks invalid, active and error-handle edges', () => {
    const edges = toCanvasEdges(flow, {
      ...noDecorations,
      invalid: new Set(['tool']),
      active: new Set(['run']),
      errorHandles: new Set(['lead/error']),
    });
    expect(edges[1].className).toContain('invalid');
    expect(edges[0].className).not.toContain('invalid');
    expect(edges[0].animated).toBe(true);
    expect(edges[1].animated).toBe(false);
    expect(edges[2].className).toContain('edge-error');
  });
});

describe('ids', () => {
  it('numbers nodes with the smallest unused number', () => {
    expect(newNodeId('agent', new Set())).toBe('agent-1');
    expect(newNodeId('agent', new Set(['agent-1', 'agent-3']))).toBe('agent-2');
  });

  it('calls the start node start while that is free', () => {
    expect(newNodeId('start', new Set(['agent-1']))).toBe('start');
    expect(newNodeId('start', new Set(['start']))).toBe('start-1');
  });

  it('names edges source-handle-target, with a suffix when taken', () => {
    expect(newEdgeId('a', 'output', 'b', new Set())).toBe('a-output-b');
    expect(newEdgeId('a', 'output', 'b', new Set(['a-output-b']))).toBe('a-output-b-2');
    expect(newEdgeId('a', 'output', 'b', new Set(['a-output-b', 'a-output-b-2']))).toBe('a-output-b-3');
  });
});

describe('copy and paste', () => {
  it('pastes copies with new ids, moved by 40 px, with the edges among them', () => {
    const flow = offlineFlow();
    const clipboard = copyNodes(flow, ['summary', 'large']);
    // Only the edge between the two copied nodes comes along.
    expect(clipboard.edges.map((edge) => edge.id)).toEqual(['summary-output-large']);

    const pasted = pasteNodes(flow, clipboard);
    expect(pasted.nodeIds).toEqual(['template-1', 'if-1']);
    const [summaryCopy, largeCopy] = pasted.flow.nodes.slice(-2);
    expect(summaryCopy.position).toEqual({ x: 280, y: 140 });
    expect(largeCopy.position).toEqual({ x: 520, y: 140 });
    expect(largeCopy.data).toEqual(flow.nodes[2].data);

    const newEdges = pasted.flow.edges.slice(flow.edges.length);
    expect(newEdges).toEqual([{ id: 'template-1-output-if-1', source: 'template-1', target: 'if-1' }]);
    expect(pasted.flow.nodes).toHaveLength(flow.nodes.length + 2);
  });

  it('keeps pasted data apart from the original', () => {
    const flow = offlineFlow();
    const pasted = pasteNodes(flow, copyNodes(flow, ['large']));
    const copy = pasted.flow.nodes.at(-1)!;
    (getPath(copy.data, 'conditions') as unknown as { value: number }[])[0].value = 5;
    expect(getPath(flow.nodes[2].data, 'conditions')).toEqual([{ field: 'amount', operator: 'gt', value: 100 }]);
  });
});

describe('nested data paths', () => {
  it('reads and writes dotted names', () => {
    const data = setPath({ tools: { subagents: true } } as unknown as NodeData, 'tools.web_search', true);
    expect(data).toEqual({ tools: { subagents: true, web_search: true } });
    expect(getPath(data, 'tools.web_search')).toBe(true);
    expect(getPath(data, 'retry.maxAttempts')).toBeUndefined();
  });

  it('removes emptied objects when a key is cleared', () => {
    const data = setPath({ retry: { maxAttempts: 3 } } as unknown as NodeData, 'retry.maxAttempts', undefined);
    expect(data).toEqual({});
  });
});
