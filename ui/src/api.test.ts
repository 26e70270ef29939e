import { afterEach, describe, expect, it } from 'vitest';
import { clearMocks, mockIPC } from '@tauri-apps/api/mocks';
import { tauriApi } from './api';
import { catalog } from './test/fixtures';

describe('the kinds the canvas is drawn from', () => {
  const asked: string[] = [];

  afterEach(() => {
    delete window.__WEFT_KINDS__;
    asked.length = 0;
    clearMocks();
  });

  it('are taken from the page when the shell put them there, without asking the engine', async () => {
    mockIPC((command) => {
      asked.push(command);
      throw new Error('the engine was asked');
    });
    window.__WEFT_KINDS__ = catalog;
    await expect(tauriApi.describeKinds()).resolves.toBe(catalog);
    expect(asked).toEqual([]);
  });

  it('are asked of the engine in a page the shell did not prepare', async () => {
    mockIPC((command) => {
      asked.push(command);
      return catalog;
    });
    await expect(tauriApi.describeKinds()).resolves.toEqual(catalog);
    expect(asked).toEqual(['describe_kinds']);
  });
});
