import type { Store } from '../store/database.ts';
import type { CredentialEncryption } from './credential-encryption.ts';
import { CredentialRepository } from './credential-repository.ts';

/** credential_rotate refuses while some blob is encrypted with another key than the primary. */
export class UnmigratedCredentialsError extends Error {
  override name = 'UnmigratedCredentialsError';
  constructor() {
    super(
      'Unable to rotate credential keys because not all credentials are encrypted with the primary key. Please make sure all credentials have been encrypted with the primary key using `credential_migrate`.',
    );
  }
}

/**
 * keystone-manage's credential key commands over the stored blobs: key_hash tells which key
 * encrypted each one, so a rotation (which may purge the oldest key) waits until every blob is
 * under the primary key, and credential_migrate moves them there.
 */
export class CredentialKeyMaintenance {
  private readonly repository = new CredentialRepository();

  constructor(
    private readonly store: Store,
    private readonly encryption: CredentialEncryption,
  ) {}

  /** How many blobs are encrypted with another key than the primary. */
  unmigratedCount(): Promise<number> {
    return this.repository.countNotEncryptedWith(this.store.reader(), this.encryption.primaryKeyHash);
  }

  /** Throws UnmigratedCredentialsError unless every blob is under the primary key. */
  async assertRotatable(): Promise<void> {
    if ((await this.unmigratedCount()) > 0) throw new UnmigratedCredentialsError();
  }

  /** credential_migrate: every blob not under the primary key encrypted again with it, one row per transaction. */
  async migrate(pageSize = 100): Promise<number> {
    let migrated = 0;
    let after = '';
    for (;;) {
      const page = await this.repository.page(this.store.reader(), after, pageSize);
      if (page.length === 0) return migrated;
      after = page[page.length - 1]!.id;
      for (const { id, keyHash } of page) {
        if (keyHash === this.encryption.primaryKeyHash) continue;
        const done = await this.store.transaction(async (em) => {
          const row = await this.repository.find(em, id);
          if (!row || row.keyHash === this.encryption.primaryKeyHash) return false;
          const { encryptedBlob, keyHash: primary } = this.encryption.encrypt(this.encryption.decrypt(row.encryptedBlob));
          row.encryptedBlob = encryptedBlob;
          row.keyHash = primary;
          await this.repository.saveChanges(em);
          return true;
        });
        if (done) migrated++;
      }
    }
  }
}
