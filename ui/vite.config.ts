/// <reference types="vitest/config" />
import { defineConfig } from 'vite';
import react from '@vitejs/plugin-react';

// The Tauri shell loads dist/ from disk (relative base) and the dev server from
// http://127.0.0.1:5173 (tauri.conf.json's devUrl), so host and port are fixed.
export default defineConfig({
  base: './',
  plugins: [react()],
  clearScreen: false,
  server: { host: '127.0.0.1', port: 5173, strictPort: true },
  build: { outDir: 'dist', target: 'es2022' },
  // Non-ASCII characters written as escapes: WebKit then holds the script's text (and
  // JavaScriptCore parses it) one byte a character instead of two, the whole script being
  // widened by its first character beyond Latin-1 (an ellipsis, an arrow).
  esbuild: { charset: 'ascii' },
  test: {
    environment: 'jsdom',
    setupFiles: ['./src/testSetup.ts'],
    globals: false,
  },
});
