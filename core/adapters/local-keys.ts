import {
  createHmac,
  createPrivateKey,
  createPublicKey,
  generateKeyPair,
  randomBytes,
  randomUUID,
  timingSafeEqual,
  webcrypto,
} from 'node:crypto';
import { link, mkdir, readdir, readFile, rename, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { publicJwk } from '../kernel/jwk';
import { combinedKeyRing } from '../kernel/key-rings';
import type { KeyRing, MacKey, PublicJwk, Signer, SigningAlg } from '../kernel/ports';

// Layout of DATA_DIR/keys: one `<kid>.pem` (PKCS#8, mode 0600) per key, and `active` naming the
// key that signs. Every key in the folder is published in the JWKS, which is what rotation needs:
// add a key (published, not yet signing), activate it once caches have picked it up, retire the
// old one after the longest token lifetime has passed. The RSA keys (RS256 ID tokens) have a
// folder of their own, DATA_DIR/keys/rs256 (LOCAL_RSA_KEY_FOLDER), laid out and rotated alike.

/** The RSA keys' folder in the key folder. */
export const LOCAL_RSA_KEY_FOLDER = 'rs256';

/** WebCrypto's name of each algorithm's keys, and how each key is generated. */
const WEBCRYPTO_ALGORITHM = {
  EdDSA: { name: 'Ed25519' },
  RS256: { name: 'RSASSA-PKCS1-v1_5', hash: 'SHA-256' },
} as const;
const generate = promisify(generateKeyPair);
const generatePrivateKey = async (alg: SigningAlg) =>
  (alg === 'RS256' ? await generate('rsa', { modulusLength: 2048 }) : await generate('ed25519')).privateKey;

/**
 * `signingKey` is the private key imported into WebCrypto: Node signs with it on its threadpool,
 * off the event loop (node:crypto's sign() would take the main thread for every token).
 */
interface LocalKey {
  kid: string;
  signingKey: webcrypto.CryptoKey;
  jwk: PublicJwk;
}

export interface LocalKeyStore extends KeyRing {
  list(): Promise<Array<{ kid: string; active: boolean }>>;
  /** Creates a new key; it is published at once and signs only when activated. */
  add(): Promise<string>;
  activate(kid: string): Promise<void>;
  /** Removes a key that is no longer active: tokens it signed stop verifying. */
  retire(kid: string): Promise<void>;
}

const ACTIVE_FILE = 'active';
/**
 * A running service re-reads the folder this often, so `admin key …` changes reach it without a
 * restart.
 */
const RELOAD_INTERVAL_MS = 10_000;

async function writeAtomically(path: string, content: string, mode: number) {
  const temporary = `${path}.${randomUUID()}.tmp`;
  await writeFile(temporary, content, { mode });
  await rename(temporary, path);
}

async function readKeyFile(path: string, alg: SigningAlg): Promise<LocalKey> {
  const privateKey = createPrivateKey(await readFile(path));
  const jwk = await publicJwk(alg, createPublicKey(privateKey));
  const pkcs8 = privateKey.export({ format: 'der', type: 'pkcs8' });
  const signingKey = await webcrypto.subtle.importKey('pkcs8', pkcs8, WEBCRYPTO_ALGORITHM[alg], false, ['sign']);
  return { kid: jwk.kid, signingKey, jwk };
}

type LoadedKeys = { keys: LocalKey[]; activeKid: string; loadedAt: number };

/**
 * The key folder as a running process sees it: read at most every RELOAD_INTERVAL_MS (single
 * flight: concurrent requests share one read), and read again at once after a change made here.
 */
function keyFolder(dir: string, alg: SigningAlg) {
  let cached: LoadedKeys | undefined;
  let loading: Promise<LoadedKeys> | undefined;

  async function createKey(): Promise<string> {
    const privateKey = await generatePrivateKey(alg);
    const jwk = await publicJwk(alg, createPublicKey(privateKey));
    const pem = privateKey.export({ format: 'pem', type: 'pkcs8' }).toString();
    await writeAtomically(join(dir, `${jwk.kid}.pem`), pem, 0o600);
    cached = undefined;
    return jwk.kid;
  }

  async function readFolder(): Promise<LoadedKeys> {
    let files = (await readdir(dir)).filter((name) => name.endsWith('.pem'));
    if (files.length === 0) {
      // First start: one key, active.
      const kid = await createKey();
      await writeAtomically(join(dir, ACTIVE_FILE), kid, 0o600);
      files = [`${kid}.pem`];
    }
    const keys = await Promise.all(files.sort().map((file) => readKeyFile(join(dir, file), alg)));
    const activeKid = (await readFile(join(dir, ACTIVE_FILE), 'utf8').catch(() => '')).trim();
    if (!keys.some((key) => key.kid === activeKid)) {
      throw new Error(`signing key folder ${dir} has no valid '${ACTIVE_FILE}' key; run 'admin key activate KID'`);
    }
    return { keys, activeKid, loadedAt: Date.now() };
  }

  return {
    createKey,
    load(): Promise<LoadedKeys> {
      if (cached && Date.now() - cached.loadedAt < RELOAD_INTERVAL_MS) return Promise.resolve(cached);
      loading ??= readFolder().then(
        (loaded) => {
          cached = loaded;
          loading = undefined;
          return loaded;
        },
        (error: unknown) => {
          loading = undefined;
          throw error;
        },
      );
      return loading;
    },
    /** The next load reads the folder again. */
    changed() {
      cached = undefined;
    },
  };
}

/** The key folder `dir` of `alg`'s keys (Ed25519 by default), its first key created on first open. */
export async function openLocalKeyStore(dir: string, alg: SigningAlg = 'EdDSA'): Promise<LocalKeyStore> {
  await mkdir(dir, { recursive: true, mode: 0o700 });
  const folder = keyFolder(dir, alg);
  const { load } = folder;
  // Open means ready: the first key exists before any request can race to create it.
  await load();

  return {
    async activeSigner(): Promise<Signer> {
      const { keys, activeKid } = await load();
      const key = keys.find((candidate) => candidate.kid === activeKid)!;
      return {
        kid: key.kid,
        sign: async (message) =>
          new Uint8Array(await webcrypto.subtle.sign(WEBCRYPTO_ALGORITHM[alg], key.signingKey, message)),
      };
    },
    async publicKeys() {
      const { keys, activeKid } = await load();
      // Active key first: verifiers that pick the first key without a kid match still work.
      return [...keys].sort((a, b) => Number(b.kid === activeKid) - Number(a.kid === activeKid)).map((key) => key.jwk);
    },
    async list() {
      const { keys, activeKid } = await load();
      return keys.map((key) => ({ kid: key.kid, active: key.kid === activeKid }));
    },
    async add() {
      await load();
      return folder.createKey();
    },
    async activate(kid) {
      const { keys } = await load();
      if (!keys.some((key) => key.kid === kid)) throw new Error(`no signing key ${kid}`);
      await writeAtomically(join(dir, ACTIVE_FILE), kid, 0o600);
      folder.changed();
    },
    async retire(kid) {
      const { keys, activeKid } = await load();
      if (kid === activeKid) throw new Error(`key ${kid} is active; activate another key first`);
      if (!keys.some((key) => key.kid === kid)) throw new Error(`no signing key ${kid}`);
      await rm(join(dir, `${kid}.pem`));
      folder.changed();
    },
  };
}

/**
 * The key ring of a local process: the Ed25519 keys of the key folder `dir` and the RSA keys of
 * its LOCAL_RSA_KEY_FOLDER (`rsa`), each created on first start. Its list, add, activate and retire
 * are the Ed25519 keys'.
 */
export async function openLocalKeyRing(dir: string): Promise<LocalKeyStore & { rsa: LocalKeyStore }> {
  const [ed25519, rsa] = await Promise.all([
    openLocalKeyStore(dir),
    openLocalKeyStore(join(dir, LOCAL_RSA_KEY_FOLDER), 'RS256'),
  ]);
  return { ...ed25519, ...combinedKeyRing(ed25519, rsa), rsa };
}

/** The local MAC key files in the key folder: 32 random bytes, base64url, mode 0600. */
/** Signs sign-in CSRF tokens and device cookies. */
export const MAC_KEY_FILE = 'mac.key';
/**
 * The page-token key is derived from it (core/kernel/page-token.ts); a key of its own, so nothing
 * else can mint sign-in tokens.
 */
export const PAGE_TOKEN_KEY_FILE = 'page-token.key';
const MAC_KEY_BYTES = 32;

async function readMacKey(path: string): Promise<Buffer | undefined> {
  const text = await readFile(path, 'utf8').catch((error: NodeJS.ErrnoException) => {
    if (error.code === 'ENOENT') return undefined;
    throw error;
  });
  if (text === undefined) return undefined;
  const secret = Buffer.from(text.trim(), 'base64url');
  if (secret.length !== MAC_KEY_BYTES) {
    throw new Error(
      `MAC key file ${path} does not hold ${MAC_KEY_BYTES} bytes; delete it to make a new one ` +
        '(what it signed is then refused: browsers sign in again, or lists restart from the first page)',
    );
  }
  return secret;
}

/**
 * A MAC key of a local run (HMAC-SHA-256) in `dir`/`file`, created on first start. Processes sharing
 * DATA_DIR share it: the file is written whole under a temporary name and linked into place,
 * which fails if another process got there first (then its key is used).
 */
export async function openLocalMacKey(
  dir: string,
  file: typeof MAC_KEY_FILE | typeof PAGE_TOKEN_KEY_FILE = MAC_KEY_FILE,
): Promise<MacKey> {
  await mkdir(dir, { recursive: true, mode: 0o700 });
  const path = join(dir, file);
  let secret = await readMacKey(path);
  if (!secret) {
    const temporary = `${path}.${randomUUID()}.tmp`;
    await writeFile(temporary, `${randomBytes(MAC_KEY_BYTES).toString('base64url')}\n`, { mode: 0o600 });
    await link(temporary, path).catch((error: NodeJS.ErrnoException) => {
      if (error.code !== 'EEXIST') throw error;
    });
    await rm(temporary, { force: true });
    secret = (await readMacKey(path))!;
  }
  const key = secret;
  const hmac = (message: Uint8Array) => createHmac('sha256', key).update(message).digest();
  return {
    mac: async (message) => new Uint8Array(hmac(message)),
    async verify(message, mac) {
      const expected = hmac(message);
      return mac.length === expected.length && timingSafeEqual(expected, mac);
    },
  };
}
