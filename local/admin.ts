// Lambda runs Node 22; the SDK's notice about Node 20 is noise on a laptop and in CI.
process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED ??= 'true';

import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { createAccountsModule, createRegistration, publicClient, publicUser } from '../core/accounts';
import { buildModules, directoryModule, modulePorts, provisioningModule } from '../core/registry';
import { serviceConfig } from '../core/kernel/config';
import { OPERATOR, type AliasView } from '../core/directory/aliases';
import { DomainError } from '../core/kernel/errors';
import { identifierKey } from '../core/oauth/sign-in-guard';
import { createDynamoStore } from '../core/adapters/dynamo-store';
import { documentClient, ensureTables } from '../core/adapters/dynamo-schema';
import { openLocalKeyStore } from '../core/adapters/local-keys';
import { systemClock, systemRandom } from '../core/adapters/system';
import { isRefreshResponse, REFRESH_RESPONSES, type AccountType, type Client, type User } from '../core/kernel/model';
import type { Store } from '../core/store';
import { tableNames } from '../core/tables';
import { DataInUseError, localDynamoClient, startEmbeddedDynamo, type EmbeddedDynamo } from './embedded-dynamo';
import { localEnvironment } from './environment';
import { LOCAL_TABLE_PREFIX } from './runner';
import { withDeployedStore } from './deployed';
import { runnerFile, runnerNote } from './running';
import { LocalStartError } from './start-errors';
import type { EnvironmentName } from '../lib/config';

// The admin CLI: `npm run --silent admin -- <command>`. Prints one JSON object on stdout and
// exits 0, or one line on stderr and exits non-zero (1: the command failed, 2: usage).

/** Usage, per command group: `admin help [GROUP]` and `admin GROUP … --help` print it (exit 0). */
const COMMANDS: Record<string, string[]> = {
  client: [
    'client create --name N --redirect-uri URI [--redirect-uri URI…] --scope "openid profile email" [--refresh-response null|omit]',
    'client list | client show CLIENT_ID | client disable CLIENT_ID | client enable CLIENT_ID',
  ],
  'api-client': ['api-client create --name N --scope "messaging poll" [--owner SVCNUM_ID]   (an owner lets it send messages from the owner\'s numbers)'],
  'prov-client': ['prov-client create --name N --owner SVCNUM_ID --scope "prov:numbers prov:masks prov:agents"'],
  user: [
    'user create --email E (--password P | --password-stdin) [--setup-required] [--account-type person|business|ai_agent]',
    'user list | user show SVCNUM_ID|EMAIL|NUMBER | user disable SVCNUM_ID',
    'user unthrottle SVCNUM_ID|EMAIL|NUMBER      forget failed sign-ins on the account\'s email, number and svcnum_id',
  ],
  number: [
    'number seed --from NUMBER --count N      add consecutive numbers to the pool',
    'number show|suspend|reactivate|deactivate NUMBER',
  ],
  quota: ['quota set --owner SVCNUM_ID [--independent N] [--dependent N] [--masks N] [--numbers N]      agents, live masks, programmable numbers'],
  alias: ['alias add --svcnum-id SVCNUM_ID --alias A | alias remove A | alias list --svcnum-id SVCNUM_ID'],
  key: ['key list | key add | key activate KID | key retire KID      (local signing keys in DATA_DIR/keys)'],
};

const USAGE_FOOTER = `options: --env sandbox|production  act on a deployed environment instead of the local data
environment: DATA_DIR (default .data); a running \`npm start\` with the same DATA_DIR is used through the note it leaves there (runner.json)`;

function usage(group?: string): string {
  const lines = group && COMMANDS[group] ? COMMANDS[group] : Object.values(COMMANDS).flat();
  return `usage: npm run --silent admin -- <command> [options]\n\n${lines.map((line) => `  ${line}`).join('\n')}\n\n${USAGE_FOOTER}`;
}

/** The commands of a group, as its usage lines name them (`client` → create, list, show, …). */
const commandsOf = (group: string) => (COMMANDS[group] ?? [])
  .flatMap((line) => [...line.matchAll(new RegExp(`(?:^|\\| )${group} ([a-z|]+)`, 'g'))].flatMap((match) => match[1]!.split('|')));

/** Help that was asked for: printed on stdout, exit 0. */
class HelpRequested {
  constructor(readonly text: string) {}
}

class UsageError extends Error {}

const clientJson = (client: Client) => {
  const shown = publicClient(client);
  return {
    client_id: shown.clientId, kind: shown.kind, name: shown.name,
    // Records from before the option have none: they answer `null`, the spec's default.
    ...(client.kind === 'login' ? { redirect_uris: shown.redirectUris, refresh_response: client.refreshResponse ?? 'null' } : {}),
    scope: shown.scopes.join(' '), ...(client.ownerId ? { owner: client.ownerId } : {}), disabled: shown.disabled, created_at: shown.createdAt,
  };
};

const userJson = (user: User) => {
  const shown = publicUser(user);
  return {
    svcnum_id: shown.svcnumId, svcnum: shown.svcnum, ...(shown.email ? { email: shown.email } : {}),
    status: shown.status, account_type: shown.accountType, created_at: shown.createdAt,
  };
};

/** The identifiers a person may sign in with, each with its own sign-in throttle count. */
const signInIdentifiers = (user: User) => Object.entries({ email: user.email, number: user.svcnum, svcnum_id: user.svcnumId })
  .filter((entry): entry is [string, string] => entry[1] !== undefined);

/** Live throttle counts of an account's identifiers: `[{identifier, failures, blocked_until?}]`. */
async function signInThrottle(store: Store, user: User) {
  const now = Date.now();
  const live = [];
  for (const [identifier, value] of signInIdentifiers(user)) {
    const state = await store.getSignInThrottle(identifierKey(value), now);
    if (state) live.push({ identifier, failures: state.failures, ...(state.blockedUntil > now ? { blocked_until: new Date(state.blockedUntil).toISOString() } : {}) });
  }
  return live;
}

async function readStdin(): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of process.stdin) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString('utf8').replace(/\r?\n$/, '');
}

/**
 * The local tables: DATA_DIR opened for this one command, or, while `npm start` holds it, through
 * the running service's embedded DynamoDB (its runner.json note says where; local/running.ts).
 */
async function withLocalStore<T>(dataDir: string, work: (store: Store) => Promise<T>): Promise<T> {
  let embedded: EmbeddedDynamo | undefined;
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
      await ensureTables(client, tables);
    } catch (error) {
      if (embedded || (error as { code?: string }).code !== 'ECONNREFUSED') throw error;
      throw new LocalStartError(`${dataDir} is in use, but nothing answers at ${endpoint}, where ${runnerFile(dataDir)} says its service is; is \`npm start\` still starting?`);
    }
    return await work(createDynamoStore(documentClient(client), tables));
  } finally {
    client.destroy();
    await embedded?.close();
  }
}

const ACCOUNT_TYPES: readonly AccountType[] = ['person', 'business', 'ai_agent'];

async function run(argv: string[]): Promise<unknown> {
  const { values, positionals } = parseArgs({
    args: argv,
    allowPositionals: true,
    strict: true,
    options: {
      name: { type: 'string' },
      'redirect-uri': { type: 'string', multiple: true },
      'refresh-response': { type: 'string' },
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
  if (values['refresh-response'] !== undefined && `${noun} ${verb}` !== 'client create') throw new UsageError('--refresh-response belongs to client create');
  if (rest.length > 0) throw new UsageError(`unexpected arguments: ${rest.join(' ')}`);
  if (values.env !== undefined) {
    if (values.env !== 'sandbox' && values.env !== 'production') throw new UsageError('--env must be sandbox or production');
  }
  // --env: the environment's real tables, named by its stack outputs (local/deployed.ts).
  const deployed = values.env as EnvironmentName | undefined;
  const env = localEnvironment();
  const need = (value: string | undefined, what: string) => {
    if (value === undefined || value === '') throw new UsageError(`${noun} ${verb} needs ${what}`);
    return value;
  };

  if (noun === 'key') {
    if (deployed) throw new UsageError('key commands manage the local keys; a deployed environment signs with KMS keys (docs/deploying.md: "Rotate the signing key")');
    const keys = await openLocalKeyStore(join(env.dataDir, 'keys'));
    switch (verb) {
      case 'list': return { keys: await keys.list() };
      case 'add': return { kid: await keys.add(), active: false, keys: await keys.list() };
      case 'activate': await keys.activate(need(argument, 'a KID')); return { keys: await keys.list() };
      case 'retire': await keys.retire(need(argument, 'a KID')); return { keys: await keys.list() };
      default: throw new UsageError(`unknown command: key ${verb ?? ''}`.trim());
    }
  }

  const withStore = <T>(work: (store: Store) => Promise<T>) =>
    (deployed ? withDeployedStore(deployed, work) : withLocalStore(env.dataDir, work));
  return withStore(async (store) => {
    const registration = createRegistration(store, systemClock, systemRandom);
    const accounts = createAccountsModule({ store, clock: systemClock });
    // The provisioning lifecycle and the directory need no keys: a key ring that is never asked.
    const noMac = { mac: () => Promise.reject(new Error('no MAC here')), verify: () => Promise.reject(new Error('no MAC here')) };
    const offlineCore = () => buildModules(modulePorts({
      store, clock: systemClock, random: systemRandom, config: serviceConfig('http://localhost'),
      keys: { activeSigner: () => Promise.reject(new Error('no signing here')), publicKeys: async () => [] },
      macKey: noMac,
      pageTokenKey: noMac,
    }), [provisioningModule, directoryModule]);
    const lifecycle = () => offlineCore().provisioning.lifecycle;
    const aliases = () => offlineCore().directory.aliases;
    const aliasJson = (alias: AliasView) => ({ alias: alias.alias, svcnum_id: alias.svcnumId, created_at: new Date(alias.createTime).toISOString() });
    const integer = (value: string | undefined, what: string) => {
      if (value === undefined) return undefined;
      if (!/^\d{1,6}$/.test(value)) throw new UsageError(`${what} must be a whole number`);
      return Number(value);
    };
    const found = <T>(value: T | undefined, what: string): T => {
      if (value === undefined) throw new Error(`no ${what} ${argument ?? values.owner ?? ''}`.trim());
      return value;
    };
    switch (`${noun} ${verb ?? ''}`.trim()) {
      case 'client create': {
        const refreshResponse = values['refresh-response'];
        if (refreshResponse !== undefined && !isRefreshResponse(refreshResponse)) {
          throw new UsageError(`--refresh-response must be ${REFRESH_RESPONSES.join(' or ')}`);
        }
        const { client } = await registration.createLoginClient({
          name: need(values.name, '--name'), scope: need(values.scope, '--scope'), redirectUris: values['redirect-uri'] ?? [],
          ...(refreshResponse !== undefined ? { refreshResponse } : {}),
        });
        return clientJson(client);
      }
      case 'api-client create': {
        const { client, clientSecret } = await registration.createApiClient({
          name: need(values.name, '--name'), scope: need(values.scope, '--scope'), ...(values.owner ? { ownerId: values.owner } : {}),
        });
        return { ...clientJson(client), client_secret: clientSecret, note: 'the client secret is shown only now; store it safely' };
      }
      case 'prov-client create': {
        const { client, clientSecret } = await registration.createProvisioningClient({
          name: need(values.name, '--name'), scope: need(values.scope, '--scope'), ownerId: need(values.owner, '--owner'),
        });
        return { ...clientJson(client), client_secret: clientSecret, note: 'the client secret is shown only now; store it safely' };
      }
      case 'number seed': return lifecycle().seed(need(values.from, '--from'), integer(need(values.count, '--count'), '--count')!);
      case 'number show': return lifecycle().show(need(argument, 'a NUMBER'));
      case 'number suspend': return lifecycle().suspend(need(argument, 'a NUMBER'));
      case 'number reactivate': return lifecycle().reactivate(need(argument, 'a NUMBER'));
      case 'number deactivate': return lifecycle().deactivate(need(argument, 'a NUMBER'));
      case 'quota set': {
        const given = {
          independentAgentQuota: integer(values.independent, '--independent'),
          dependentAgentQuota: integer(values.dependent, '--dependent'),
          maskQuota: integer(values.masks, '--masks'),
          numberQuota: integer(values.numbers, '--numbers'),
        };
        const overrides = Object.fromEntries(Object.entries(given).filter(([, value]) => value !== undefined));
        if (Object.keys(overrides).length === 0) throw new UsageError('quota set needs at least one of --independent, --dependent, --masks, --numbers');
        const owner = found(await store.setQuotaOverrides(need(values.owner, '--owner'), overrides), 'account');
        return {
          svcnum_id: owner.svcnumId, independent_agent_quota: owner.independentAgentQuota ?? null, dependent_agent_quota: owner.dependentAgentQuota ?? null,
          mask_quota: owner.maskQuota ?? null, number_quota: owner.numberQuota ?? null,
        };
      }
      // Operators may alias any entity (people included) and use reserved names.
      case 'alias add': return aliasJson(await aliases().create(OPERATOR, { svcnumId: need(values['svcnum-id'], '--svcnum-id'), alias: need(values.alias, '--alias') }));
      case 'alias remove': return { ...aliasJson(await aliases().remove(OPERATOR, need(argument, 'an ALIAS'))), removed: true };
      case 'alias list': {
        const svcnumId = need(values['svcnum-id'], '--svcnum-id');
        return { svcnum_id: svcnumId, aliases: (await aliases().list(OPERATOR, svcnumId)).map(aliasJson) };
      }
      case 'client list': return { clients: (await store.listClients()).sort((a, b) => a.createdAt - b.createdAt).map(clientJson) };
      case 'client show': return clientJson(found(await store.getClient(need(argument, 'a CLIENT_ID')), 'client'));
      case 'client disable':
      case 'client enable':
        return clientJson(found(await store.setClientDisabled(need(argument, 'a CLIENT_ID'), verb === 'disable'), 'client'));
      case 'user create': {
        if (values.password !== undefined && values['password-stdin']) throw new UsageError('use --password or --password-stdin, not both');
        const password = values['password-stdin'] ? await readStdin() : values.password;
        const accountType = values['account-type'] ?? 'person';
        if (!ACCOUNT_TYPES.includes(accountType as AccountType)) throw new UsageError(`--account-type must be one of ${ACCOUNT_TYPES.join(', ')}`);
        const user = await registration.createUser({
          email: need(values.email, '--email'), password: need(password, '--password or --password-stdin'),
          setupRequired: values['setup-required'] ?? false, accountType: accountType as AccountType,
        });
        return userJson(user);
      }
      case 'user list': return { users: (await store.listUsers()).sort((a, b) => a.createdAt - b.createdAt).map(userJson) };
      case 'user show': {
        const user = found(await accounts.findUser(need(argument, 'a SVCNUM_ID, email or number')), 'user');
        const throttle = await signInThrottle(store, user);
        return { ...userJson(user), ...(throttle.length > 0 ? { sign_in_throttle: throttle } : {}) };
      }
      case 'user unthrottle': {
        const user = found(await accounts.findUser(need(argument, 'a SVCNUM_ID, email or number')), 'user');
        for (const [, value] of signInIdentifiers(user)) await store.deleteSignInThrottle(identifierKey(value));
        return userJson(user);
      }
      case 'user disable': return userJson(found(await registration.disableUser(need(argument, 'a SVCNUM_ID')), 'user'));
      default: throw new UsageError(`unknown command: ${positionals.join(' ')}`);
    }
  });
}

try {
  const result = await run(process.argv.slice(2));
  process.stdout.write(result instanceof HelpRequested ? `${result.text}\n` : `${JSON.stringify(result, null, 2)}\n`);
} catch (error) {
  const usageError = error instanceof UsageError || (error as { code?: string }).code?.startsWith('ERR_PARSE_ARGS');
  // One line, always: node's parseArgs messages can run over several.
  const message = (error instanceof Error ? error.message : String(error)).split('\n')[0]!.replace(/\. To specify a positional argument.*$/, '');
  process.stderr.write(`${usageError ? `${message} (see: admin help)` : message}\n`);
  const expected = usageError || error instanceof DomainError || error instanceof LocalStartError;
  if (!expected && process.env.DEBUG) process.stderr.write(`${(error as Error).stack}\n`);
  process.exitCode = usageError ? 2 : 1;
}
