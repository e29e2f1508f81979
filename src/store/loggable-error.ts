/**
 * What of an error may go to the log. The SQL driver writes the failed statement into the message
 * with its values interpolated (password hashes, secrets), and PostgreSQL's `detail` repeats values
 * too: a database error is logged by its codes and names only.
 */
export function loggableError(error: unknown): unknown {
  if (typeof error !== 'object' || error === null) return error;
  const fields = error as Record<string, unknown>;
  const fromDatabase = typeof fields.sqlState === 'string' || typeof fields.routine === 'string' || typeof fields.severity === 'string';
  if (!fromDatabase) return error;
  const safe: Record<string, unknown> = { type: (error as Error).constructor?.name ?? 'Error' };
  for (const key of ['code', 'sqlState', 'severity', 'table', 'column', 'constraint', 'routine']) {
    if (typeof fields[key] === 'string' || typeof fields[key] === 'number') safe[key] = fields[key];
  }
  return safe;
}
