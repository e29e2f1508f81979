import { randomUUID } from 'node:crypto';

/** Keystone's server-assigned id format: a uuid4 as 32 lowercase hex digits. */
export function newId(): string {
  return randomUUID().replace(/-/g, '');
}
