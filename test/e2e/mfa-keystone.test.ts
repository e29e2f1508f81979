import t from 'tap';
import { ADMIN_PASSWORD, PUBLIC_URL, startTestApp } from '../helpers/app.ts';
import { PEER_PASSWORD, PEER_URL, peerUp } from '../helpers/keystone-peer.ts';

// MFA rules and auth receipts over HTTP, against this service and against the real Keystone 22
// (../shared/peers/keystone/start.sh; that half is skipped without a peer): the same requests, the
// same statuses, bodies (ids, receipts and times replaced by labels) and headers. The peer does
// not enable `totp` in [auth] methods, so the rules here use methods both offer (password, token,
// application_credential; mapped as a method neither client can use). Everything made is deleted.

interface Seen {
  status: number;
  said: unknown;
  receiptHeader?: boolean;
  wwwAuthenticate?: boolean;
}

interface Answer {
  status: number;
  headers: Headers;
  body: any;
}

async function send(url: string, method: string, options: { token?: string; receipt?: string; body?: unknown } = {}): Promise<Answer> {
  const headers: Record<string, string> = {};
  if (options.body !== undefined) headers['content-type'] = 'application/json';
  if (options.token) headers['x-auth-token'] = options.token;
  if (options.receipt !== undefined) headers['openstack-auth-receipt'] = options.receipt;
  const response = await fetch(url, { method, headers, body: options.body === undefined ? undefined : JSON.stringify(options.body), signal: AbortSignal.timeout(20_000) });
  const text = await response.text();
  return { status: response.status, headers: response.headers, body: text ? JSON.parse(text) : undefined };
}

async function scenario(base: string, adminPassword: string, linkBase = base): Promise<Record<string, Seen>> {
  const prefix = `mfa-${Date.now().toString(36)}${Math.random().toString(36).slice(2, 6)}`;
  const auth = (identity: unknown, scope?: unknown, receipt?: string) =>
    send(`${base}/v3/auth/tokens`, 'POST', { body: { auth: { identity, ...(scope ? { scope } : {}) } }, ...(receipt !== undefined ? { receipt } : {}) });
  const password = (userId: string, secret: string) => ({ methods: ['password'], password: { user: { id: userId, password: secret } } });
  const admin = await auth({ methods: ['password'], password: { user: { name: 'admin', domain: { id: 'default' }, password: adminPassword } } }, { project: { name: 'admin', domain: { id: 'default' } } });
  if (admin.status !== 201) throw new Error(`admin login: ${admin.status}`);
  const adminToken = admin.headers.get('x-subject-token')!;
  const projectId = admin.body.token.project.id as string;
  const api = (method: string, route: string, body?: unknown, token = adminToken) => send(`${base}${route}`, method, { token, ...(body === undefined ? {} : { body }) });
  const labels = new Map<string, string>([[projectId, '<project>']]);
  const plain = (value: unknown): unknown => {
    let text = JSON.stringify(value ?? null).split(linkBase).join('<base>');
    for (const [id, name] of labels) text = text.split(id).join(name);
    text = text.replace(/\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z/g, '<time>');
    return JSON.parse(text.split(prefix).join('~'));
  };
  // Python lists a set's members in hash order: methods and rules are compared sorted.
  const sortedReceipt = (body: any) => {
    if (!body?.receipt) return body;
    const lifetime = Date.parse(body.receipt.expires_at) - Date.parse(body.receipt.issued_at);
    return {
      ...body,
      receipt: { ...body.receipt, methods: [...body.receipt.methods].sort(), lifetime },
      required_auth_methods: body.required_auth_methods.map((rule: string[]) => [...rule].sort()).sort(),
    };
  };
  const seen: Record<string, Seen> = {};
  const note = (step: string, answer: Answer) => {
    const said = answer.status === 201 ? [...answer.body.token.methods].sort() : answer.body?.error?.message ?? sortedReceipt(answer.body);
    seen[step] = {
      status: answer.status,
      said: plain(said),
      ...(answer.status === 401 ? { receiptHeader: answer.headers.has('openstack-auth-receipt'), wwwAuthenticate: answer.headers.has('www-authenticate') } : {}),
    };
    return answer;
  };
  const users: string[] = [];
  try {
    const member = (await api('GET', '/v3/roles?name=member')).body.roles[0].id as string;
    const makeUser = async (name: string) => {
      const created = await api('POST', '/v3/users', { user: { name: `${prefix}-${name}`, password: `pw-${prefix}`, domain_id: 'default' } });
      const id = created.body.user.id as string;
      users.push(id);
      labels.set(id, `<${name}>`);
      await api('PUT', `/v3/projects/${projectId}/users/${id}/roles/${member}`);
      return id;
    };
    const alice = await makeUser('alice');
    const bob = await makeUser('bob');
    const setRules = async (userId: string, options: unknown) => {
      const answer = await api('PATCH', `/v3/users/${userId}`, { user: { options } });
      if (answer.status !== 200) throw new Error(`options: ${answer.status} ${JSON.stringify(answer.body)}`);
      return answer.body.user.options;
    };
    const first = await auth(password(alice, `pw-${prefix}`), { project: { id: projectId } });
    const aliceToken = first.headers.get('x-subject-token')!;
    const credential = (await api('POST', `/v3/users/${alice}/application_credentials`, { application_credential: { name: `${prefix}-ac`, secret: 'ac-secret' } }, aliceToken)).body.application_credential;

    seen['options echoed'] = { status: 200, said: plain(await setRules(alice, { multi_factor_auth_rules: [['token', 'password']] })) };
    const partial = note('password: rules not satisfied', await auth(password(alice, `pw-${prefix}`), { project: { id: projectId } }));
    const receipt = partial.headers.get('openstack-auth-receipt') ?? '';
    labels.set(receipt, '<receipt>');
    note('token + receipt completes', await auth({ methods: ['token'], token: { id: aliceToken } }, { project: { id: projectId } }, receipt));
    note('garbage receipt', await auth(password(alice, `pw-${prefix}`), undefined, 'garbage-receipt'));
    note('garbage receipt, wrong password', await auth(password(alice, 'wrong'), undefined, 'garbage-receipt'));
    await setRules(bob, { multi_factor_auth_rules: [['token', 'password']] });
    const bobs = (await auth(password(bob, `pw-${prefix}`))).headers.get('openstack-auth-receipt') ?? '';
    labels.set(bobs, '<bob-receipt>');
    note("another user's receipt", await auth(password(alice, `pw-${prefix}`), undefined, bobs));
    note('application credential', await auth({ methods: ['application_credential'], application_credential: { id: credential.id, secret: 'ac-secret' } }));
    await setRules(alice, { multi_factor_auth_rules: [['password', 'mapped']] });
    note('re-scope under [password, mapped]', await auth({ methods: ['token'], token: { id: aliceToken } }));
    note('password under [password, mapped]', await auth(password(alice, `pw-${prefix}`)));
    await setRules(alice, { multi_factor_auth_rules: [['token', 'password'], ['mapped', 'token'], ['oauth1', 'password', 'external']] });
    note('three rules', await auth(password(alice, `pw-${prefix}`)));
    await setRules(alice, { multi_factor_auth_enabled: false });
    note('rules disabled', await auth(password(alice, `pw-${prefix}`)));
    await setRules(alice, { multi_factor_auth_enabled: null, multi_factor_auth_rules: [['bogus']] });
    note('a rule of unknown methods', await auth(password(alice, `pw-${prefix}`)));
    await setRules(alice, { multi_factor_auth_rules: [['password', 'bogus']] });
    note('unknown methods dropped', await auth(password(alice, `pw-${prefix}`)));
    for (const rules of [[[]], [['password'], ['password']], [['password', 'password']], 'x']) {
      const refused = await api('PATCH', `/v3/users/${alice}`, { user: { options: { multi_factor_auth_rules: rules } } });
      seen[`invalid rules ${JSON.stringify(rules)}`] = { status: refused.status, said: null };
    }
  } finally {
    for (const id of users) await api('DELETE', `/v3/users/${id}`);
  }
  return seen;
}

// What the live Keystone 22 answered (PRINT_SCENARIO=1 prints a run).
const KEYSTONE: Record<string, Seen> = {
  "options echoed": {
    "status": 200,
    "said": {
      "multi_factor_auth_rules": [
        [
          "token",
          "password"
        ]
      ]
    }
  },
  "password: rules not satisfied": {
    "status": 401,
    "said": {
      "receipt": {
        "methods": [
          "password"
        ],
        "user": {
          "id": "<alice>",
          "name": "~-alice",
          "domain": {
            "id": "default",
            "name": "Default"
          }
        },
        "expires_at": "<time>",
        "issued_at": "<time>",
        "lifetime": 300000
      },
      "required_auth_methods": [
        [
          "password",
          "token"
        ]
      ]
    },
    "receiptHeader": true,
    "wwwAuthenticate": false
  },
  "token + receipt completes": {
    "status": 201,
    "said": [
      "password",
      "token"
    ]
  },
  "garbage receipt": {
    "status": 401,
    "said": "Could not find auth receipt: garbage-receipt.",
    "receiptHeader": false,
    "wwwAuthenticate": true
  },
  "garbage receipt, wrong password": {
    "status": 401,
    "said": "The request you have made requires authentication.",
    "receiptHeader": false,
    "wwwAuthenticate": true
  },
  "another user's receipt": {
    "status": 401,
    "said": "Could not find auth receipt: <bob-receipt>.",
    "receiptHeader": false,
    "wwwAuthenticate": true
  },
  "application credential": {
    "status": 401,
    "said": {
      "receipt": {
        "methods": [
          "application_credential"
        ],
        "user": {
          "id": "<alice>",
          "name": "~-alice",
          "domain": {
            "id": "default",
            "name": "Default"
          }
        },
        "expires_at": "<time>",
        "issued_at": "<time>",
        "lifetime": 300000
      },
      "required_auth_methods": []
    },
    "receiptHeader": true,
    "wwwAuthenticate": false
  },
  "re-scope under [password, mapped]": {
    "status": 401,
    "said": {
      "receipt": {
        "methods": [
          "password",
          "token"
        ],
        "user": {
          "id": "<alice>",
          "name": "~-alice",
          "domain": {
            "id": "default",
            "name": "Default"
          }
        },
        "expires_at": "<time>",
        "issued_at": "<time>",
        "lifetime": 300000
      },
      "required_auth_methods": [
        [
          "mapped",
          "password"
        ]
      ]
    },
    "receiptHeader": true,
    "wwwAuthenticate": false
  },
  "password under [password, mapped]": {
    "status": 401,
    "said": {
      "receipt": {
        "methods": [
          "password"
        ],
        "user": {
          "id": "<alice>",
          "name": "~-alice",
          "domain": {
            "id": "default",
            "name": "Default"
          }
        },
        "expires_at": "<time>",
        "issued_at": "<time>",
        "lifetime": 300000
      },
      "required_auth_methods": [
        [
          "mapped",
          "password"
        ]
      ]
    },
    "receiptHeader": true,
    "wwwAuthenticate": false
  },
  "three rules": {
    "status": 401,
    "said": {
      "receipt": {
        "methods": [
          "password"
        ],
        "user": {
          "id": "<alice>",
          "name": "~-alice",
          "domain": {
            "id": "default",
            "name": "Default"
          }
        },
        "expires_at": "<time>",
        "issued_at": "<time>",
        "lifetime": 300000
      },
      "required_auth_methods": [
        [
          "external",
          "oauth1",
          "password"
        ],
        [
          "password",
          "token"
        ]
      ]
    },
    "receiptHeader": true,
    "wwwAuthenticate": false
  },
  "rules disabled": {
    "status": 201,
    "said": [
      "password"
    ]
  },
  "a rule of unknown methods": {
    "status": 201,
    "said": [
      "password"
    ]
  },
  "unknown methods dropped": {
    "status": 201,
    "said": [
      "password"
    ]
  },
  "invalid rules [[]]": {
    "status": 400,
    "said": null
  },
  "invalid rules [[\"password\"],[\"password\"]]": {
    "status": 400,
    "said": null
  },
  "invalid rules [[\"password\",\"password\"]]": {
    "status": 400,
    "said": null
  },
  "invalid rules \"x\"": {
    "status": 400,
    "said": null
  }
};

function check(t: { same(found: unknown, wanted: unknown): unknown }, seen: Record<string, Seen>) {
  if (process.env.PRINT_SCENARIO) console.error(JSON.stringify(seen, null, 1));
  t.same(seen, KEYSTONE);
}

t.test('this service: MFA rules and receipts', async (t) => {
  const testApp = await startTestApp(t);
  await testApp.app.server.listen({ port: 0, host: '127.0.0.1' });
  const address = testApp.app.server.server.address();
  const base = `http://127.0.0.1:${typeof address === 'object' && address ? address.port : 0}`;
  check(t, await scenario(base, ADMIN_PASSWORD, PUBLIC_URL));
});

const skip = (await peerUp()) ? false : `no Keystone peer at ${PEER_URL} (start ../shared/peers/keystone/start.sh)`;

t.test('Keystone 22: MFA rules and receipts', { skip }, async (t) => {
  check(t, await scenario(PEER_URL, PEER_PASSWORD));
});
