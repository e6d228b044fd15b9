// Lambda runs Node 22; the SDK's notice about Node 20 is noise on a laptop and in CI.
process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED ??= 'true';

import { realpathSync } from 'node:fs';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';
import type { AliasView } from '../core/directory/aliases';
import { DomainError } from '../core/kernel/errors';
import {
  type AccountType,
  type Client,
  DPOP_MODES,
  type Grant,
  isDpopMode,
  type Passkey,
  type User,
} from '../core/kernel/model';
import { isSigningAlg, SIGNING_ALGS } from '../core/kernel/ports';
import type { Store } from '../core/store';
import type { DeployedOptions } from './deployed';
import { LocalStartError } from './start-errors';
import type { EnvironmentName } from '../lib/config';

// The admin CLI: `npm run --silent admin -- <command>`. Prints one JSON object on stdout and
// exits 0, or one line on stderr and exits non-zero (1: the command failed, 2: usage).

/** Usage, per command group: `admin help [GROUP]` and `admin GROUP … --help` print it (exit 0). */
const COMMANDS: Record<string, string[]> = {
  client: [
    'client create --name N --redirect-uri URI [--redirect-uri URI…] --scope "openid profile email offline_access" ' +
      '[--refresh-response null|omit] [--id-token-alg EdDSA|RS256] [--post-logout-redirect-uri URI…] ' +
      '[--dpop optional|required]',
    '      --refresh-response omit: needed by openid-client 6, oauth4webapi 3, Python authlib and requests-oauthlib ' +
      '(they refuse or store "refresh_token": null); null is the default',
    "      --id-token-alg RS256: needed by libraries that know only OIDC Core's mandatory algorithm: passport with " +
      'openid-client 5 by default, and many server frameworks; EdDSA is the default',
    '      --post-logout-redirect-uri: where RP-Initiated Logout may send the browser back (exact match; repeatable)',
    '      --dpop required: every token request needs a DPoP proof (RFC 9449); optional (default) binds tokens ' +
      'when a proof comes (also on api-client and prov-client create)',
    'client list | client show CLIENT_ID | client disable CLIENT_ID | client enable CLIENT_ID',
  ],
  'api-client': [
    'api-client create --name N --scope "messaging poll" [--owner SVCNUM_ID] [--dpop optional|required]   (an owner ' +
      "lets it send messages from the owner's numbers)",
  ],
  'prov-client': [
    'prov-client create --name N --owner SVCNUM_ID --scope "prov:numbers prov:masks prov:agents" ' +
      '[--dpop optional|required]',
  ],
  user: [
    'user create --email E (--password P | --password-stdin) [--setup-required] [--account-type ' +
      'person|business|ai_agent]',
    'user list | user show SVCNUM_ID|EMAIL|NUMBER',
    'user disable|enable SVCNUM_ID|EMAIL|NUMBER      disable: no sign-in, every grant revoked; enable: may sign in ' +
      'again',
    "user grants SVCNUM_ID|EMAIL|NUMBER      the account's grants in force (one per consent chain: a refresh token)",
    "user unthrottle SVCNUM_ID|EMAIL|NUMBER      forget failed sign-ins on the account's email, number and svcnum_id",
    "user passkeys SVCNUM_ID|EMAIL|NUMBER      the account's passkeys (never a public key)",
    'user remove-passkey SVCNUM_ID|EMAIL|NUMBER CREDENTIAL_ID      that passkey no longer signs in',
  ],
  grant: [
    'grant revoke GRANT_ID      its refresh token stops working at once (as RFC 7009 revocation)',
    'grant revoke --user SVCNUM_ID|EMAIL|NUMBER (--all | --client CLIENT_ID)      as the account page\'s "Revoke ' +
      'access": consent forgotten, grants revoked',
  ],
  number: [
    'number seed --from NUMBER --count N      add consecutive numbers to the pool',
    'number show|suspend|reactivate|deactivate NUMBER',
  ],
  quota: [
    'quota set --owner SVCNUM_ID [--independent N] [--dependent N] [--masks N] [--numbers N]      agents, live ' +
      'masks, programmable numbers',
  ],
  alias: ['alias add --svcnum-id SVCNUM_ID --alias A | alias remove A | alias list --svcnum-id SVCNUM_ID'],
  key: [
    'key list | key add | key activate KID | key retire KID [--alg EdDSA|RS256]      (local signing keys in ' +
      'DATA_DIR/keys; --alg RS256: the RSA keys of RS256 ID tokens, in DATA_DIR/keys/rs256)',
  ],
};

const USAGE_FOOTER = `options: --env sandbox|production  act on a deployed environment instead of the local data
environment: DATA_DIR (default .data); a running \`npm start\` with the same DATA_DIR is used through the note
             it leaves there (runner.json)`;

function usage(group?: string): string {
  const lines = group && COMMANDS[group] ? COMMANDS[group] : Object.values(COMMANDS).flat();
  const commands = lines.map((line) => `  ${line}`).join('\n');
  return `usage: npm run --silent admin -- <command> [options]\n\n${commands}\n\n${USAGE_FOOTER}`;
}

/** The commands of a group, as its usage lines name them (`client` → create, list, show, …). */
const commandsOf = (group: string) => [
  ...new Set(
    (COMMANDS[group] ?? []).flatMap((line) =>
      [...line.matchAll(new RegExp(`(?:^|\\| )${group} ([a-z|-]+)`, 'g'))].flatMap((match) => match[1]!.split('|')),
    ),
  ),
];

/** Help that was asked for: printed on stdout, exit 0. */
export class HelpRequested {
  constructor(readonly text: string) {}
}

export class UsageError extends Error {}

/** The commands that take --dpop (a client's DPoP setting, RFC 9449). */
const DPOP_COMMANDS = ['client create', 'api-client create', 'prov-client create'];

// What a command needs is imported when it runs (each await below): `help` and a usage error load
// no SDK, a local command never loads CloudFormation's, and nothing here loads KMS's.
const core = () => import('../core/accounts');

async function clientJson(client: Client) {
  const shown = (await core()).publicClient(client);
  return {
    client_id: shown.clientId,
    kind: shown.kind,
    name: shown.name,
    // Records from before the option have none: they answer `null`, the spec's default.
    ...(client.kind === 'login'
      ? {
          redirect_uris: shown.redirectUris,
          refresh_response: client.refreshResponse ?? 'null',
          id_token_alg: client.idTokenAlg ?? 'EdDSA',
          post_logout_redirect_uris: client.postLogoutRedirectUris ?? [],
        }
      : {}),
    scope: shown.scopes.join(' '),
    // Records from before the option have none: `optional`.
    dpop: client.dpop ?? 'optional',
    ...(client.ownerId ? { owner: client.ownerId } : {}),
    disabled: shown.disabled,
    created_at: shown.createdAt,
  };
}

async function userJson(user: User) {
  const shown = (await core()).publicUser(user);
  return {
    svcnum_id: shown.svcnumId,
    svcnum: shown.svcnum,
    ...(shown.email ? { email: shown.email } : {}),
    status: shown.status,
    account_type: shown.accountType,
    created_at: shown.createdAt,
  };
}

const iso = (time: number) => new Date(time).toISOString();

/** A passkey as `user passkeys` prints it: never its public key. */
const passkeyJson = (passkey: Passkey) => ({
  credential_id: passkey.credentialId,
  svcnum_id: passkey.svcnumId,
  name: passkey.name,
  created_at: iso(passkey.createdAt),
  last_used_at: passkey.lastUsedAt !== undefined ? iso(passkey.lastUsedAt) : null,
  synced: passkey.backedUp,
  backup_eligible: passkey.backupEligible,
  transports: passkey.transports,
  counter: passkey.counter,
});

/** A grant as `user grants` and `grant revoke` print it: never its secret's hash. */
const grantJson = (grant: Grant, clients?: Map<string, Client | undefined>) => ({
  grant_id: grant.grantId,
  client_id: grant.clientId,
  ...(clients ? { client_name: clients.get(grant.clientId)?.name ?? null } : {}),
  svcnum_id: grant.svcnumId,
  scope: grant.scopes.join(' '),
  created_at: iso(grant.createdAt),
  // The sliding window is moved at most about once a day: a later time is a use on that day.
  ...(grant.lastUsedAt > grant.createdAt ? { last_used_at: iso(grant.lastUsedAt) } : {}),
  ...(grant.revokedAt !== undefined ? { revoked_at: iso(grant.revokedAt) } : {}),
});

/** The identifiers a person may sign in with, each with its own sign-in throttle count. */
const signInIdentifiers = (user: User) =>
  Object.entries({ email: user.email, number: user.svcnum, svcnum_id: user.svcnumId }).filter(
    (entry): entry is [string, string] => entry[1] !== undefined,
  );

/** Live throttle counts of an account's identifiers: `[{identifier, failures, blocked_until?}]`. */
async function signInThrottle(store: Store, user: User) {
  const { identifierKey } = await import('../core/oauth/sign-in-guard');
  const now = Date.now();
  const live = [];
  for (const [identifier, value] of signInIdentifiers(user)) {
    const state = await store.getSignInThrottle(identifierKey(value), now);
    if (state)
      live.push({
        identifier,
        failures: state.failures,
        ...(state.blockedUntil > now ? { blocked_until: iso(state.blockedUntil) } : {}),
      });
  }
  return live;
}

async function readStdin(): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of process.stdin) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks)
    .toString('utf8')
    .replace(/\r?\n$/, '');
}

const localStoreModules = () =>
  Promise.all([
    import('./embedded-dynamo'),
    import('./running'),
    import('../core/adapters/dynamo-schema'),
    import('../core/adapters/dynamo-store'),
    import('../core/tables'),
  ]);

/** Runs `work` with a store on the tables a command acts on. */
type WithStore = <T>(work: (store: Store) => Promise<T>) => Promise<T>;

/**
 * The local tables: DATA_DIR opened for this one command, or, while `npm start` holds it, through
 * the running service's embedded DynamoDB (its runner.json note says where; local/running.ts).
 */
async function withLocalStore<T>(
  dataDir: string,
  work: (store: Store) => Promise<T>,
  modules = localStoreModules(),
): Promise<T> {
  const [
    { DataInUseError, localDynamoClient, startEmbeddedDynamo },
    { LOCAL_TABLE_PREFIX, runnerFile, runnerNote },
    schema,
    { createDynamoStore },
    { tableNames },
  ] = await modules;
  let embedded: Awaited<ReturnType<typeof startEmbeddedDynamo>> | undefined;
  let endpoint: string;
  try {
    embedded = await startEmbeddedDynamo(dataDir, 0);
    endpoint = embedded.endpoint;
  } catch (error) {
    const note = error instanceof DataInUseError ? await runnerNote(dataDir) : undefined;
    if (!note) throw error;
    endpoint = note.dynamoEndpoint;
  }
  const client = localDynamoClient(endpoint);
  try {
    const tables = tableNames(LOCAL_TABLE_PREFIX);
    try {
      await schema.ensureMissingTables(client, tables);
    } catch (error) {
      if (embedded || (error as { code?: string }).code !== 'ECONNREFUSED') throw error;
      throw new LocalStartError(
        `${dataDir} is in use, but nothing answers at ${endpoint}, where ${runnerFile(dataDir)} says its service ` +
          `is; is \`npm start\` still starting?`,
      );
    }
    return await work(createDynamoStore(schema.documentClient(client), tables));
  } finally {
    client.destroy();
    await embedded?.close();
  }
}

const ACCOUNT_TYPES: readonly AccountType[] = ['person', 'business', 'ai_agent'];

/** How a command reaches a deployed environment (tests give mocked AWS clients' settings). */
export interface AdminOptions {
  deployed?: DeployedOptions;
}

/**
 * A KID is base64url (an RFC 7638 thumbprint) and may begin with `-`, which parseArgs would take
 * for an option: the argument of `key activate` and `key retire` is a positional whatever it looks like.
 */
function kidAsPositional(argv: string[]): string[] {
  const [noun, verb, kid, ...rest] = argv;
  if (
    noun !== 'key' ||
    (verb !== 'activate' && verb !== 'retire') ||
    kid === undefined ||
    !kid.startsWith('-') ||
    kid.startsWith('--')
  )
    return argv;
  return [...rest, noun, verb, '--', kid];
}

/** Runs one command: its JSON answer, or HelpRequested; throws UsageError, DomainError or Error. */
export async function runAdminCommand(argv: string[], options: AdminOptions = {}): Promise<unknown> {
  const { values, positionals } = parseArgs({
    args: kidAsPositional(argv),
    allowPositionals: true,
    strict: true,
    options: {
      name: { type: 'string' },
      'redirect-uri': { type: 'string', multiple: true },
      'refresh-response': { type: 'string' },
      'id-token-alg': { type: 'string' },
      'post-logout-redirect-uri': { type: 'string', multiple: true },
      alg: { type: 'string' },
      dpop: { type: 'string' },
      scope: { type: 'string' },
      email: { type: 'string' },
      password: { type: 'string' },
      'password-stdin': { type: 'boolean' },
      'setup-required': { type: 'boolean' },
      'account-type': { type: 'string' },
      env: { type: 'string' },
      owner: { type: 'string' },
      from: { type: 'string' },
      count: { type: 'string' },
      independent: { type: 'string' },
      dependent: { type: 'string' },
      masks: { type: 'string' },
      numbers: { type: 'string' },
      'svcnum-id': { type: 'string' },
      alias: { type: 'string' },
      user: { type: 'string' },
      client: { type: 'string' },
      all: { type: 'boolean' },
      help: { type: 'boolean', short: 'h' },
    },
  });
  const [noun, verb, argument, ...rest] = positionals;
  if (noun === 'help') return new HelpRequested(usage(verb));
  if (values.help) return new HelpRequested(usage(noun));
  if (noun === undefined) throw new UsageError('no command given');
  // Checked before any store is opened (locally or in AWS): a typo touches nothing.
  if (!Object.hasOwn(COMMANDS, noun)) throw new UsageError(`unknown command: ${positionals.join(' ')}`);
  if (verb === undefined) throw new UsageError(`${noun} needs one of: ${commandsOf(noun).join(', ')}`);
  if (!commandsOf(noun).includes(verb)) throw new UsageError(`unknown command: ${noun} ${verb}`);
  const command = `${noun} ${verb}`;
  for (const option of ['refresh-response', 'id-token-alg', 'post-logout-redirect-uri'] as const) {
    if (values[option] !== undefined && command !== 'client create')
      throw new UsageError(`--${option} belongs to client create`);
  }
  if (values.alg !== undefined && noun !== 'key') throw new UsageError('--alg belongs to the key commands');
  if (values.dpop !== undefined && !DPOP_COMMANDS.includes(command))
    throw new UsageError(`--dpop belongs to ${DPOP_COMMANDS.join(', ')}`);
  if (values.dpop !== undefined && !isDpopMode(values.dpop))
    throw new UsageError(`--dpop must be ${DPOP_MODES.join(' or ')}`);
  for (const option of ['user', 'client', 'all'] as const) {
    if (values[option] !== undefined && command !== 'grant revoke')
      throw new UsageError(`--${option} belongs to grant revoke`);
  }
  if (command === 'grant revoke') {
    // Exactly one target: a grant, every grant of the account, or those of one application.
    if (values.user === undefined && (values.all || values.client !== undefined))
      throw new UsageError('--all and --client need --user');
    if (values.user !== undefined && argument !== undefined)
      throw new UsageError('grant revoke takes a GRANT_ID or --user, not both');
    if (values.user !== undefined && (values.all ?? false) === (values.client !== undefined))
      throw new UsageError('grant revoke --user needs --all or --client CLIENT_ID');
  }
  // `user remove-passkey` names the account, then the passkey.
  const extra = command === 'user remove-passkey' ? rest.slice(1) : rest;
  if (extra.length > 0) throw new UsageError(`unexpected arguments: ${extra.join(' ')}`);
  if (values.env !== undefined) {
    if (values.env !== 'sandbox' && values.env !== 'production')
      throw new UsageError('--env must be sandbox or production');
  }
  // --env: the environment's real tables, named by its stack outputs (local/deployed.ts).
  const deployed = values.env as EnvironmentName | undefined;
  const need = (value: string | undefined, what: string) => {
    if (value === undefined || value === '') throw new UsageError(`${noun} ${verb} needs ${what}`);
    return value;
  };
  // DATA_DIR is the local data's; a deployed environment does not read it.
  const dataDir = () => import('./environment').then(({ localEnvironment }) => localEnvironment().dataDir);

  if (noun === 'key') {
    if (deployed)
      throw new UsageError(
        'key commands manage the local keys; a deployed environment signs with KMS keys (docs/deploying.md: "Rotate ' +
          'the signing key")',
      );
    const { openLocalKeyStore, LOCAL_RSA_KEY_FOLDER } = await import('../core/adapters/local-keys');
    if (values.alg !== undefined && !isSigningAlg(values.alg))
      throw new UsageError(`--alg must be ${SIGNING_ALGS.join(' or ')}`);
    const rsa = values.alg === 'RS256';
    const folder = join(await dataDir(), 'keys', ...(rsa ? [LOCAL_RSA_KEY_FOLDER] : []));
    const keys = await openLocalKeyStore(folder, rsa ? 'RS256' : 'EdDSA');
    switch (verb) {
      case 'list':
        return { keys: await keys.list() };
      case 'add':
        return { kid: await keys.add(), active: false, keys: await keys.list() };
      case 'activate':
        await keys.activate(need(argument, 'a KID'));
        return { keys: await keys.list() };
      case 'retire':
        await keys.retire(need(argument, 'a KID'));
        return { keys: await keys.list() };
      default:
        throw new UsageError(`unknown command: key ${verb ?? ''}`.trim());
    }
  }

  // The store's modules load alongside the core's, not after them.
  const opening: Promise<WithStore> = deployed
    ? import('./deployed').then(
        ({ withDeployedStore }) =>
          (work) =>
            withDeployedStore(deployed, work, options.deployed),
      )
    : Promise.all([dataDir(), localStoreModules()]).then(
        ([folder, modules]) =>
          (work) =>
            withLocalStore(folder, work, Promise.resolve(modules)),
      );
  const [{ createAccountsModule, createRegistration }, { systemClock, systemRandom }, withStore] = await Promise.all([
    core(),
    import('../core/adapters/system'),
    opening,
  ]);
  return withStore(async (store) => {
    const registration = createRegistration(store, systemClock, systemRandom);
    const accounts = createAccountsModule({ store, clock: systemClock });
    const userGrants = async () =>
      (await import('../core/oauth/user-grants')).createUserGrants({ store, clock: systemClock });
    // The provisioning lifecycle and the directory need no keys: a key ring that is never asked.
    const offlineCore = async () => {
      const [{ buildModules, directoryModule, modulePorts, provisioningModule }, { serviceConfig }] = await Promise.all(
        [import('../core/registry'), import('../core/kernel/config')],
      );
      const noMac = {
        mac: () => Promise.reject(new Error('no MAC here')),
        verify: () => Promise.reject(new Error('no MAC here')),
      };
      return buildModules(
        modulePorts({
          store,
          clock: systemClock,
          random: systemRandom,
          config: serviceConfig('http://localhost'),
          keys: { activeSigner: () => Promise.reject(new Error('no signing here')), publicKeys: async () => [] },
          macKey: noMac,
          pageTokenKey: noMac,
        }),
        [provisioningModule, directoryModule],
      );
    };
    const lifecycle = async () => (await offlineCore()).provisioning.lifecycle;
    const aliases = async () => (await offlineCore()).directory.aliases;
    const aliasJson = (alias: AliasView) => ({
      alias: alias.alias,
      svcnum_id: alias.svcnumId,
      created_at: iso(alias.createTime),
    });
    const integer = (value: string | undefined, what: string) => {
      if (value === undefined) return undefined;
      if (!/^\d{1,6}$/.test(value)) throw new UsageError(`${what} must be a whole number`);
      return Number(value);
    };
    const found = <T>(value: T | undefined, what: string, identifier = argument ?? values.owner ?? ''): T => {
      if (value === undefined) throw new Error(`no ${what} ${identifier}`.trim());
      return value;
    };
    /**
     * The account a `user` command (or `grant revoke --user`) names: by svcnum_id, email or number, as sign-in finds
     * it.
     */
    const account = async (identifier: string | undefined) =>
      found(await accounts.findUser(need(identifier, 'a SVCNUM_ID, email or number')), 'user', identifier);
    /** The grants' applications, each read once, for their names. */
    const clientsOf = async (grants: Grant[]) =>
      new Map(
        await Promise.all(
          [...new Set(grants.map((grant) => grant.clientId))].map(
            async (clientId) => [clientId, await store.getClient(clientId)] as const,
          ),
        ),
      );
    switch (command) {
      case 'client create': {
        const { isRefreshResponse, REFRESH_RESPONSES } = await import('../core/kernel/model');
        const refreshResponse = values['refresh-response'];
        if (refreshResponse !== undefined && !isRefreshResponse(refreshResponse)) {
          throw new UsageError(`--refresh-response must be ${REFRESH_RESPONSES.join(' or ')}`);
        }
        const idTokenAlg = values['id-token-alg'];
        if (idTokenAlg !== undefined && !isSigningAlg(idTokenAlg)) {
          throw new UsageError(`--id-token-alg must be ${SIGNING_ALGS.join(' or ')}`);
        }
        const { client } = await registration.createLoginClient({
          name: need(values.name, '--name'),
          scope: need(values.scope, '--scope'),
          redirectUris: values['redirect-uri'] ?? [],
          ...(refreshResponse !== undefined ? { refreshResponse } : {}),
          ...(idTokenAlg !== undefined ? { idTokenAlg } : {}),
          ...(values['post-logout-redirect-uri'] ? { postLogoutRedirectUris: values['post-logout-redirect-uri'] } : {}),
          ...(values.dpop !== undefined ? { dpop: values.dpop } : {}),
        });
        return clientJson(client);
      }
      case 'api-client create': {
        const { client, clientSecret } = await registration.createApiClient({
          name: need(values.name, '--name'),
          scope: need(values.scope, '--scope'),
          ...(values.owner ? { ownerId: values.owner } : {}),
          ...(values.dpop !== undefined ? { dpop: values.dpop } : {}),
        });
        return {
          ...(await clientJson(client)),
          client_secret: clientSecret,
          note: 'the client secret is shown only now; store it safely',
        };
      }
      case 'prov-client create': {
        const { client, clientSecret } = await registration.createProvisioningClient({
          name: need(values.name, '--name'),
          scope: need(values.scope, '--scope'),
          ownerId: need(values.owner, '--owner'),
          ...(values.dpop !== undefined ? { dpop: values.dpop } : {}),
        });
        return {
          ...(await clientJson(client)),
          client_secret: clientSecret,
          note: 'the client secret is shown only now; store it safely',
        };
      }
      case 'number seed':
        return (await lifecycle()).seed(
          need(values.from, '--from'),
          integer(need(values.count, '--count'), '--count')!,
        );
      case 'number show':
        return (await lifecycle()).show(need(argument, 'a NUMBER'));
      case 'number suspend':
        return (await lifecycle()).suspend(need(argument, 'a NUMBER'));
      case 'number reactivate':
        return (await lifecycle()).reactivate(need(argument, 'a NUMBER'));
      case 'number deactivate':
        return (await lifecycle()).deactivate(need(argument, 'a NUMBER'));
      case 'quota set': {
        const given = {
          independentAgentQuota: integer(values.independent, '--independent'),
          dependentAgentQuota: integer(values.dependent, '--dependent'),
          maskQuota: integer(values.masks, '--masks'),
          numberQuota: integer(values.numbers, '--numbers'),
        };
        const overrides = Object.fromEntries(Object.entries(given).filter(([, value]) => value !== undefined));
        if (Object.keys(overrides).length === 0)
          throw new UsageError('quota set needs at least one of --independent, --dependent, --masks, --numbers');
        const owner = found(await store.setQuotaOverrides(need(values.owner, '--owner'), overrides), 'account');
        return {
          svcnum_id: owner.svcnumId,
          independent_agent_quota: owner.independentAgentQuota ?? null,
          dependent_agent_quota: owner.dependentAgentQuota ?? null,
          mask_quota: owner.maskQuota ?? null,
          number_quota: owner.numberQuota ?? null,
        };
      }
      // Operators may alias any entity (people included) and use reserved names.
      case 'alias add': {
        const { OPERATOR } = await import('../core/directory/aliases');
        return aliasJson(
          await (await aliases()).create(OPERATOR, {
            svcnumId: need(values['svcnum-id'], '--svcnum-id'),
            alias: need(values.alias, '--alias'),
          }),
        );
      }
      case 'alias remove': {
        const { OPERATOR } = await import('../core/directory/aliases');
        return { ...aliasJson(await (await aliases()).remove(OPERATOR, need(argument, 'an ALIAS'))), removed: true };
      }
      case 'alias list': {
        const { OPERATOR } = await import('../core/directory/aliases');
        const svcnumId = need(values['svcnum-id'], '--svcnum-id');
        return { svcnum_id: svcnumId, aliases: (await (await aliases()).list(OPERATOR, svcnumId)).map(aliasJson) };
      }
      case 'client list':
        return {
          clients: await Promise.all(
            (await store.listClients()).sort((a, b) => a.createdAt - b.createdAt).map(clientJson),
          ),
        };
      case 'client show':
        return clientJson(found(await store.getClient(need(argument, 'a CLIENT_ID')), 'client'));
      case 'client disable':
      case 'client enable':
        return clientJson(
          found(await store.setClientDisabled(need(argument, 'a CLIENT_ID'), verb === 'disable'), 'client'),
        );
      case 'user create': {
        if (values.password !== undefined && values['password-stdin'])
          throw new UsageError('use --password or --password-stdin, not both');
        const password = values['password-stdin'] ? await readStdin() : values.password;
        const accountType = values['account-type'] ?? 'person';
        if (!ACCOUNT_TYPES.includes(accountType as AccountType))
          throw new UsageError(`--account-type must be one of ${ACCOUNT_TYPES.join(', ')}`);
        const user = await registration.createUser({
          email: need(values.email, '--email'),
          password: need(password, '--password or --password-stdin'),
          setupRequired: values['setup-required'] ?? false,
          accountType: accountType as AccountType,
        });
        return userJson(user);
      }
      case 'user list':
        return {
          users: await Promise.all((await store.listUsers()).sort((a, b) => a.createdAt - b.createdAt).map(userJson)),
        };
      case 'user show': {
        const user = await account(argument);
        const throttle = await signInThrottle(store, user);
        return { ...(await userJson(user)), ...(throttle.length > 0 ? { sign_in_throttle: throttle } : {}) };
      }
      case 'user unthrottle': {
        const user = await account(argument);
        const { identifierKey } = await import('../core/oauth/sign-in-guard');
        for (const [, value] of signInIdentifiers(user)) await store.deleteSignInThrottle(identifierKey(value));
        return userJson(user);
      }
      case 'user disable':
        return userJson(found(await registration.disableUser((await account(argument)).svcnumId), 'user'));
      case 'user enable':
        return userJson(found(await registration.enableUser((await account(argument)).svcnumId), 'user'));
      case 'user grants': {
        const user = await account(argument);
        const grants = await (await userGrants()).inForce(user.svcnumId);
        const clients = await clientsOf(grants);
        return { svcnum_id: user.svcnumId, grants: grants.map((grant) => grantJson(grant, clients)) };
      }
      case 'user passkeys': {
        const user = await account(argument);
        return { svcnum_id: user.svcnumId, passkeys: (await store.listPasskeys(user.svcnumId)).map(passkeyJson) };
      }
      case 'user remove-passkey': {
        const user = await account(argument);
        const credentialId = need(rest[0], 'a CREDENTIAL_ID');
        const removed = found(await store.deletePasskey(user.svcnumId, credentialId), 'passkey', credentialId);
        return { ...passkeyJson(removed), removed: true };
      }
      case 'grant revoke': {
        const grants = await userGrants();
        if (values.user === undefined) {
          const grantId = need(argument, 'a GRANT_ID or --user');
          return { ...grantJson(found(await grants.revoke(grantId), 'grant', grantId)), revoked: true };
        }
        const user = await account(values.user);
        const revoked = values.all
          ? await grants.revokeAll(user.svcnumId)
          : await grants.revokeClient(user.svcnumId, values.client!);
        const clients = await clientsOf(revoked);
        return { svcnum_id: user.svcnumId, revoked: revoked.map((grant) => grantJson(grant, clients)) };
      }
      default:
        throw new UsageError(`unknown command: ${positionals.join(' ')}`);
    }
  });
}

/** The CLI's contract: one JSON object on stdout (exit 0), or one line on stderr (exit 1, or 2 for usage). */
export async function main(argv: string[] = process.argv.slice(2), options: AdminOptions = {}): Promise<void> {
  try {
    const result = await runAdminCommand(argv, options);
    process.stdout.write(result instanceof HelpRequested ? `${result.text}\n` : `${JSON.stringify(result, null, 2)}\n`);
  } catch (error) {
    const usageError = error instanceof UsageError || (error as { code?: string }).code?.startsWith('ERR_PARSE_ARGS');
    // One line, always: node's parseArgs messages can run over several.
    const message = (error instanceof Error ? error.message : String(error))
      .split('\n')[0]!
      .replace(/\. To specify a positional argument.*$/, '');
    process.stderr.write(`${usageError ? `${message} (see: admin help)` : message}\n`);
    const expected = usageError || error instanceof DomainError || error instanceof LocalStartError;
    if (!expected && process.env.DEBUG) process.stderr.write(`${(error as Error).stack}\n`);
    process.exitCode = usageError ? 2 : 1;
  }
}

// Run as a script (`tsx local/admin.ts …`); `npm run admin` goes through local/admin-cli.mjs,
// which runs a bundle of this file and calls main().
if (process.argv[1] && import.meta.url === pathToFileURL(realpathSync(process.argv[1])).href) await main();
