import { spawnSync } from 'node:child_process';

// Some tests check our code against an independent implementation or a real server from Debian's
// packages (botocore's AWS signer, oauthlib's OAuth 1.0a signer, slapd). `npm test` must pass on a
// fresh machine of this project's kind, so they are installed here when missing, the way
// ../shared/peers/ldap/start.sh installs slapd, rather than skipped (a skip is not a pass).

/** Preseeded answers, so installing asks nothing and configures no system-wide service. */
const PRESEED: Record<string, string> = {
  slapd: 'slapd slapd/no_configuration boolean true',
};

function installed(name: string): boolean {
  const status = spawnSync('dpkg-query', ['-W', '-f=${Status}', name], { encoding: 'utf8' });
  return status.status === 0 && status.stdout.includes('install ok installed');
}

/** The lock file every apt run of the tests takes (shared with test/helpers/ldap-peer/start.sh). */
export const APT_LOCK = '/tmp/keystone-gateway-tests-apt.lock';

/**
 * Installs the Debian packages that are not installed yet (apt-get, as root). Throws with apt's
 * output when it fails, so the test fails and says why.
 */
export function ensureDebianPackages(names: string[]): void {
  const missing = names.filter((name) => !installed(name));
  if (!missing.length) return;
  for (const name of missing) {
    const answer = PRESEED[name];
    if (answer) spawnSync('debconf-set-selections', { input: `${answer}\n`, encoding: 'utf8' });
  }
  const environment = { ...process.env, DEBIAN_FRONTEND: 'noninteractive' };
  // Test files run in parallel: one waits for another's apt instead of failing on its lock. apt's own
  // DPkg::Lock::Timeout covers dpkg's lock but not that of the package lists (`apt-get update`),
  // so every apt run of the tests goes through one flock (test/helpers/ldap-peer/start.sh too).
  const apt = (...args: string[]) => spawnSync('flock', ['-w', '600', APT_LOCK, 'apt-get', '-o', 'DPkg::Lock::Timeout=300', ...args], { env: environment, encoding: 'utf8' });
  let install = apt('install', '-y', '-qq', '--no-install-recommends', ...missing);
  if (install.status !== 0) {
    // The package lists may be missing or stale on a fresh machine.
    apt('update', '-qq');
    install = apt('install', '-y', '-qq', '--no-install-recommends', ...missing);
  }
  if (install.status !== 0) throw new Error(`could not install ${missing.join(' ')}: ${install.error?.message ?? ''}${install.stderr ?? ''}${install.stdout ?? ''}`);
}

/**
 * Debian's own python3 with the given Debian packages installed. Not `python3` from PATH: a python
 * earlier on it (pyenv here) does not see Debian's packages.
 */
export function debianPython(packages: string[]): string {
  ensureDebianPackages(['python3', ...packages]);
  return '/usr/bin/python3';
}
