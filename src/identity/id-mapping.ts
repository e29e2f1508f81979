import { createHash } from 'node:crypto';
import type { EntityManager } from '../store/database.ts';
import { IdMappingEntity } from '../store/entities.ts';

export type MappedEntityType = 'user' | 'group';

/** Where a public id points: an entity of a domain's own back end, by that back end's local id. */
export interface IdMapping {
  domainId: string;
  localId: string;
  entityType: MappedEntityType;
}

/**
 * Keystone's sha256 id generator: the mapping's keys in sorted order (domain_id, entity_type,
 * local_id), their values concatenated, hashed, in lowercase hex.
 */
export function publicIdOf(mapping: IdMapping): string {
  return createHash('sha256').update(mapping.domainId).update(mapping.entityType).update(mapping.localId).digest('hex');
}

const PUBLIC_ID = /^[0-9a-f]{64}$/;

/** Mappings written per statement (4 parameters each). */
const INSERT_CHUNK = 1000;

/**
 * The id_mapping table and an in-memory index of it (loaded at start, added to on every write and
 * on every row read back), so that placing a known public id needs no query.
 */
export class IdMappings {
  private readonly byPublicId = new Map<string, IdMapping>();

  /** Reads every stored mapping into the index. */
  async load(em: EntityManager): Promise<void> {
    for (const row of await em.find(IdMappingEntity, {})) this.index(row.publicId, row);
  }

  /** The mapping of a public id in the index (synchronous; a mapping written by another node may be missing). */
  known(publicId: string): IdMapping | undefined {
    return this.byPublicId.get(publicId);
  }

  /** The mapping of a public id: the index, else the table (another node wrote it). */
  async find(em: EntityManager, publicId: string): Promise<IdMapping | undefined> {
    const known = this.byPublicId.get(publicId);
    if (known || !PUBLIC_ID.test(publicId)) return known;
    const row = await em.findOne(IdMappingEntity, { publicId });
    return row ? this.index(row.publicId, row) : undefined;
  }

  /** The public ids of entities just seen, writing the mappings not yet stored (one statement). */
  async remember(em: EntityManager, mappings: IdMapping[]): Promise<string[]> {
    const ids = mappings.map(publicIdOf);
    const fresh = new Map<string, IdMapping>();
    mappings.forEach((mapping, index) => {
      if (!this.byPublicId.has(ids[index]!)) fresh.set(ids[index]!, mapping);
    });
    const entries = [...fresh];
    // Statements outside any transaction: the mapping is a pure function of its key, so a concurrent
    // writer (another node) writes the same row and the conflict is harmless. In chunks, as a
    // statement has at most 65535 parameters.
    for (let start = 0; start < entries.length; start += INSERT_CHUNK) {
      const chunk = entries.slice(start, start + INSERT_CHUNK);
      await em
        .getConnection()
        .execute(
          `insert into id_mapping (public_id, domain_id, local_id, entity_type) values ${chunk.map(() => '(?, ?, ?, ?)').join(', ')} on conflict do nothing`,
          chunk.flatMap(([publicId, m]) => [publicId, m.domainId, m.localId, m.entityType]),
        );
      for (const [publicId, mapping] of chunk) this.index(publicId, mapping);
    }
    return ids;
  }

  private index(publicId: string, mapping: { domainId: string; localId: string; entityType: string }): IdMapping {
    // The table's check constraint admits only these two types.
    const entry: IdMapping = { domainId: mapping.domainId, localId: mapping.localId, entityType: mapping.entityType as MappedEntityType };
    this.byPublicId.set(publicId, entry);
    return entry;
  }
}

/** Whether an id can be a public id of the mapping (SQL ids are 32-hex uuids). */
export function mayBePublicId(id: string): boolean {
  return PUBLIC_ID.test(id);
}
