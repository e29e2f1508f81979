import type { SecurityCompliance } from '../config.ts';
import { ValidationError } from '../support/errors.ts';
import type { Json, PasswordRow, UserRow } from '../store/entities.ts';

const DAY_MS = 86_400_000;

/** Keystone's defaults: every rule off. */
export const SECURITY_COMPLIANCE_OFF: SecurityCompliance = {
  passwordRegex: undefined,
  passwordRegexDescription: undefined,
  passwordExpiresDays: undefined,
  lockoutFailureAttempts: undefined,
  lockoutDurationSeconds: 1800,
  disableUserAccountDaysInactive: undefined,
  uniqueLastPasswordCount: 0,
  minimumPasswordAgeDays: 0,
  changePasswordUponFirstUse: false,
};

/** Day number of a time in UTC: Keystone keeps last_active_at as a date. */
function utcDay(milliseconds: number): number {
  return Math.floor(milliseconds / DAY_MS);
}

function option(options: Json, name: string): boolean {
  return options[name] === true;
}

/** The rules of Keystone's [security_compliance] section, with Keystone's messages. */
export class PasswordPolicy {
  constructor(readonly settings: SecurityCompliance) {}

  /** password_regex applies to every new password: create, admin reset and self-service. */
  checkStrength(password: string | null): void {
    const { passwordRegex, passwordRegexDescription } = this.settings;
    if (!passwordRegex) return;
    if (typeof password !== 'string') throw new ValidationError('Password validation error: Password must be a string type.');
    if (!passwordRegex.test(password)) {
      // Keystone formats an unset description as Python's None.
      throw new ValidationError(`The password does not match the requirements: ${passwordRegexDescription ?? 'None'}.`);
    }
  }

  /**
   * expires_at of a password set now: immediately for a password an administrator set when
   * change_password_upon_first_use is on, else password_expires_days from now (whole seconds).
   */
  expiresAt(now: number, options: Json, setBy: 'admin' | 'self' | 'operator'): Date | null {
    if (setBy === 'admin' && this.settings.changePasswordUponFirstUse && !option(options, 'ignore_change_password_upon_first_use')) {
      return new Date(now);
    }
    const days = this.settings.passwordExpiresDays;
    if (!days || option(options, 'ignore_password_expiry')) return null;
    return new Date(Math.floor((now + days * DAY_MS) / 1000) * 1000);
  }

  isExpired(password: PasswordRow | undefined, options: Json, now: number): boolean {
    const expiresAt = password?.expiresAt;
    return !!expiresAt && expiresAt.getTime() <= now && !option(options, 'ignore_password_expiry');
  }

  /** Locked after lockout_failure_attempts consecutive failures, for lockout_duration after the last one. */
  isLocked(user: UserRow, now: number): boolean {
    const attempts = this.settings.lockoutFailureAttempts;
    if (!attempts || option(user.options, 'ignore_lockout_failure_attempts')) return false;
    if (user.failedAuthCount < attempts || !user.failedAuthAt) return false;
    return user.failedAuthAt.getTime() + this.settings.lockoutDurationSeconds * 1000 > now;
  }

  /** Whether failed attempts are counted at all (only when a lockout is configured). */
  get countsFailures(): boolean {
    return this.settings.lockoutFailureAttempts !== undefined;
  }

  /**
   * `enabled` as Keystone shows it: a user not seen for disable_user_account_days_inactive days
   * (by UTC day, since its last successful authentication or else its creation) is disabled.
   */
  isEnabled(user: UserRow, now: number): boolean {
    if (!user.enabled) return false;
    const maxDays = this.settings.disableUserAccountDaysInactive;
    if (!maxDays || option(user.options, 'ignore_user_inactivity')) return true;
    const lastActive = user.lastActiveAt ?? user.createdAt;
    return utcDay(now) - utcDay(lastActive.getTime()) < maxDays;
  }

  /** last_active_at is a day in Keystone: write it at most once a day per user. */
  needsActivityUpdate(user: UserRow, now: number): boolean {
    return !user.lastActiveAt || utcDay(user.lastActiveAt.getTime()) !== utcDay(now);
  }

  /** minimum_password_age applies when the current password was set by the user itself. */
  checkMinimumAge(current: PasswordRow | undefined, now: number): void {
    const days = this.settings.minimumPasswordAgeDays;
    if (!current?.selfService || days <= 0) return;
    const allowedFrom = current.createdAt.getTime() + days * DAY_MS;
    if (now >= allowedFrom) return;
    // Python's timedelta.days: whole days, rounded down.
    const daysLeft = Math.floor((allowedFrom - now) / DAY_MS);
    throw new ValidationError(
      'You cannot change your password at this time due to the minimum password age. Once you change your password, ' +
        `it must be used for ${days} day(s) before it can be changed. Please try again in ${daysLeft} day(s) or contact ` +
        'your administrator to reset your password.',
    );
  }

  /** How many of the newest stored passwords a self-service change must differ from (0: none). */
  get historyCount(): number {
    return this.settings.uniqueLastPasswordCount;
  }

  historyError(): ValidationError {
    return new ValidationError(
      'The new password cannot be identical to a previous password. The total number which includes the new password ' +
        `must be unique is ${this.settings.uniqueLastPasswordCount}.`,
    );
  }

  /** Password rows kept before a new one is added (Keystone trims the rest). */
  get rowsKept(): number {
    return Math.max(this.settings.uniqueLastPasswordCount, 1);
  }
}
