import type { EntityManager } from '../store/database.ts';
import { CredentialEntity, type CredentialRow } from '../store/entities.ts';
import { stringConditions, type StringMatch } from '../store/filters.ts';

export interface CredentialFilter {
  userId: StringMatch[];
  type: StringMatch[];
}

/** Storage of credentials (their blobs as stored: encrypted). */
export class CredentialRepository {
  find(em: EntityManager, id: string): Promise<CredentialRow | null> {
    return em.findOne(CredentialEntity, { id });
  }

  /** By id; only those matching every condition given. */
  list(em: EntityManager, filter: CredentialFilter): Promise<CredentialRow[]> {
    const conditions = [...stringConditions('userId', filter.userId), ...stringConditions('type', filter.type)];
    return em.find(CredentialEntity, conditions.length ? { $and: conditions } : {}, { orderBy: { id: 'asc' } });
  }

  /** Every credential, a page at a time in id order (credential_migrate). */
  page(em: EntityManager, after: string, size: number): Promise<CredentialRow[]> {
    return em.find(CredentialEntity, { id: { $gt: after } }, { orderBy: { id: 'asc' }, limit: size });
  }

  /** How many blobs are encrypted with another key than `keyHash`. */
  countNotEncryptedWith(em: EntityManager, keyHash: string): Promise<number> {
    return em.count(CredentialEntity, { keyHash: { $ne: keyHash } });
  }

  async insert(em: EntityManager, row: CredentialRow): Promise<CredentialRow> {
    const credential = em.create(CredentialEntity, row);
    await em.flush();
    return credential;
  }

  /** Writes the changes made to rows read in `em`. */
  async saveChanges(em: EntityManager): Promise<void> {
    await em.flush();
  }

  async delete(em: EntityManager, row: CredentialRow): Promise<void> {
    em.remove(row);
    await em.flush();
  }
}
