/**
 * What a transaction wrote, table by table, read from the statements it sent: what the commit
 * listeners tell the caches (see events/change-topics.ts). Read at the SQL level so that flushes,
 * native updates and deletes and raw statements are all seen alike.
 */
export type WriteKind = 'insert' | 'update' | 'delete';

export interface TableWrites {
  /** Tables written, each with how (a row inserted, updated or deleted). */
  readonly tables: ReadonlyMap<string, ReadonlySet<WriteKind>>;
  /** A statement that may have written something no table name here says (e.g. a CTE): assume anything changed. */
  readonly unknown: boolean;
}

/** Collects one transaction's writes as its statements are sent. */
export class TableWriteRecorder implements TableWrites {
  readonly tables = new Map<string, Set<WriteKind>>();
  unknown = false;

  record(sql: string): void {
    const statement = classify(sql);
    if (statement === 'read') return;
    if (statement === 'unknown') {
      this.unknown = true;
      return;
    }
    let kinds = this.tables.get(statement.table);
    if (!kinds) this.tables.set(statement.table, (kinds = new Set()));
    kinds.add(statement.kind);
  }
}

// A table named as MikroORM and the raw statements name it: `"name"`, `name` or `"schema"."name"`.
const TABLE = String.raw`(?:"?\w+"?\.)?"?(\w+)"?`;
const INSERT = new RegExp(String.raw`^insert\s+into\s+${TABLE}`, 'i');
const UPDATE = new RegExp(String.raw`^update\s+(?:only\s+)?${TABLE}`, 'i');
const DELETE = new RegExp(String.raw`^delete\s+from\s+(?:only\s+)?${TABLE}`, 'i');
/** Statements that write no row: reads, locks, transaction control, session settings. */
const READ = /^(select|begin|start\s+transaction|commit|rollback|savepoint|release|set|show)\b/i;
/** A ';' with more after it (a literal holding one is read as unknown too: every topic, safe). */
const MORE_THAN_ONE = /;\s*\S/;
/** An upsert updates rows that were there before. */
const UPSERT = /\bon\s+conflict\b[\s\S]*\bdo\s+update\b/i;

/** A statement's write, 'read' when it writes nothing, 'unknown' when its writes cannot be told. */
export function classify(sql: string): { table: string; kind: WriteKind } | 'read' | 'unknown' {
  const text = sql.trimStart();
  // Only a statement's first command is read: several in one string cannot be told apart.
  if (MORE_THAN_ONE.test(text)) return 'unknown';
  if (READ.test(text)) return 'read';
  let match = INSERT.exec(text);
  if (match) return { table: match[1]!.toLowerCase(), kind: UPSERT.test(text) ? 'update' : 'insert' };
  match = UPDATE.exec(text);
  if (match) return { table: match[1]!.toLowerCase(), kind: 'update' };
  match = DELETE.exec(text);
  if (match) return { table: match[1]!.toLowerCase(), kind: 'delete' };
  return 'unknown';
}
