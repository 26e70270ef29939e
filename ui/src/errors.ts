// What the canvas shows of a failed command.

/**
 * The message of a failed command: commands reject with `AppError` (`{ code, message }`);
 * anything else (a missing Tauri host, a bug) is shown as it is rather than swallowed.
 */
export function errorMessage(error: unknown): string {
  if (typeof error === 'object' && error !== null && 'message' in error) {
    const message = (error as { message: unknown }).message;
    if (typeof message === 'string' && message !== '') return message;
  }
  if (typeof error === 'string') return error;
  return String(error);
}
