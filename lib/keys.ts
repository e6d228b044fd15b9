import { Duration } from 'aws-cdk-lib';
import { AccountRootPrincipal, PolicyDocument, PolicyStatement, Role, type IGrantable } from 'aws-cdk-lib/aws-iam';
import { Alias, Key, KeySpec, KeyUsage } from 'aws-cdk-lib/aws-kms';
import { Construct } from 'constructs';
import { keyActions, type ComputeAccess, type KeyUse, type MacAction } from './access';
import { statefulRemovalPolicy } from './util';

// The JWT signing keys: KMS Ed25519 (ECC_NIST_EDWARDS25519, SIGN_VERIFY), and beside them the RSA
// keys of RS256 ID tokens (RSA_2048, SIGN_VERIFY; clients registered with --id-token-alg RS256),
// versioned and rotated alike (SigningKeys with `alg: 'RS256'`). The private keys never leave KMS.
// One key per version in the configuration: `active` signs, `published` keys are only in the JWKS
// (a key being introduced before it signs, or one being retired after it signed).
// Rotation is a configuration change and a deploy per step (docs/deploying.md, "Rotate the signing key").
//
// Key policies: the account (IAM administrators, CloudFormation) administers these keys but cannot
// use them; each key's policy names the roles lib/access.ts gives a use of it, and nobody else.
// Without the account's `kms:*`, an IAM policy alone grants no use: whoever may sign, mint a
// device cookie or derive the page-token key is named in the key policy, where a deploy shows it.

/**
 * What the account root may do with a key of ours: administer it (KMS's "key administrators"
 * actions, spelled out: no wildcard), never use it. Left out: every cryptographic operation
 * (Sign, Verify, GenerateMac, VerifyMac, GetPublicKey: the public keys are published at deploy time
 * by a role named for it), and CreateGrant, with which an administrator could grant itself a use
 * that no key policy shows. PutKeyPolicy stays: CloudFormation updates the policy with it and KMS
 * refuses a policy that would lock the account out; a change to the policy is a CloudTrail event.
 * RotateKeyOnDemand and the key-material actions do not apply to asymmetric and HMAC keys.
 */
export const KEY_ADMIN_ACTIONS = [
  'kms:DescribeKey',
  'kms:GetKeyPolicy',
  'kms:GetKeyRotationStatus',
  'kms:ListGrants',
  'kms:ListKeyPolicies',
  'kms:ListResourceTags',
  'kms:PutKeyPolicy',
  'kms:UpdateKeyDescription',
  'kms:EnableKey',
  'kms:DisableKey',
  'kms:EnableKeyRotation',
  'kms:DisableKeyRotation',
  'kms:RevokeGrant',
  'kms:CreateAlias',
  'kms:UpdateAlias',
  'kms:DeleteAlias',
  'kms:TagResource',
  'kms:UntagResource',
  'kms:ScheduleKeyDeletion',
  'kms:CancelKeyDeletion',
] as const;

/** A key policy that lets the account administer the key and nothing else; uses are added per grantee. */
const adminOnlyKeyPolicy = () =>
  new PolicyDocument({
    statements: [
      new PolicyStatement({
        principals: [new AccountRootPrincipal()],
        actions: [...KEY_ADMIN_ACTIONS],
        resources: ['*'],
      }),
    ],
  });

/**
 * Grants `actions` on `keys` in both places: the grantee's IAM policy (on the key ARNs) and each
 * key's policy (a key policy's resource `*` is the key itself). The key policy names the role by
 * its ARN in an `aws:PrincipalArn` condition on the account principal rather than as the principal:
 * KMS checks a named principal when the policy is written and may refuse a role that IAM has not
 * propagated yet (a role created in the same deploy), and it would turn a role re-created later
 * into a stale id. The effect is the same: only that role, and only with its IAM policy.
 */
function grantKeyUse(grantee: IGrantable, keys: readonly Key[], actions: readonly string[]): void {
  const role = grantee.grantPrincipal;
  if (!(role instanceof Role)) throw new Error('key uses are granted to roles of this stack only');
  role.addToPrincipalPolicy(new PolicyStatement({ actions: [...actions], resources: keys.map((key) => key.keyArn) }));
  for (const key of keys) {
    key.addToResourcePolicy(
      new PolicyStatement({
        principals: [new AccountRootPrincipal()],
        actions: [...actions],
        resources: ['*'],
        conditions: { ArnEquals: { 'aws:PrincipalArn': role.roleArn } },
      }),
    );
  }
}

export interface SigningKeysProps {
  readonly environment: string;
  readonly active: string;
  readonly published: readonly string[];
  readonly retain: boolean;
  /** EdDSA (Ed25519, every token; the default) or RS256 (RSA 2048, the ID tokens of clients registered for it). */
  readonly alg?: 'EdDSA' | 'RS256';
}

/** Each algorithm's key: its spec, its description and its aliases' name (`signing` or `signing-rsa`). */
const SIGNING_KEY_KINDS = {
  EdDSA: { keySpec: KeySpec.ECC_NIST_EDWARDS25519, what: 'Ed25519', alias: 'signing' },
  RS256: { keySpec: KeySpec.RSA_2048, what: 'RSA 2048, RS256 ID tokens', alias: 'signing-rsa' },
} as const;

export class SigningKeys extends Construct {
  readonly active: Key;
  readonly published: Key[];
  readonly activeAlias: Alias;

  constructor(scope: Construct, id: string, props: SigningKeysProps) {
    super(scope, id);
    const kind = SIGNING_KEY_KINDS[props.alg ?? 'EdDSA'];
    const create = (version: string) => {
      const key = new Key(this, `Signing-${version}`, {
        description: `svcnum ${props.environment}: JWT signing key ${version} (${kind.what})`,
        keySpec: kind.keySpec,
        keyUsage: KeyUsage.SIGN_VERIFY,
        // Asymmetric keys cannot rotate automatically; rotation is by adding a version.
        enableKeyRotation: false,
        policy: adminOnlyKeyPolicy(),
        removalPolicy: statefulRemovalPolicy(props.retain),
        pendingWindow: Duration.days(props.retain ? 30 : 7),
      });
      new Alias(this, `Alias-${version}`, {
        aliasName: `alias/svcnum-${props.environment}/${kind.alias}-${version}`,
        targetKey: key,
      });
      return key;
    };
    this.active = create(props.active);
    this.published = props.published.map(create);
    // The stable name operators look for; it follows the active key. Processes are given the key
    // ARN, not this alias: a cached public key (kid) must always belong to the key that signs.
    this.activeAlias = new Alias(this, 'ActiveAlias', {
      aliasName: `alias/svcnum-${props.environment}/${kind.alias}`,
      targetKey: this.active,
    });
  }

  /** Every key verifiers must accept: the active one first, then the published ones. */
  get all(): Key[] {
    return [this.active, ...this.published];
  }

  /**
   * Grants `use` on the environment's keys only. Signers may sign with every key of the ring, not
   * only the active one: during the deploy that switches keys, Lambda containers and Fargate tasks
   * still running the previous configuration keep signing with the previous key until replaced.
   */
  grant(grantee: IGrantable, use: KeyUse | undefined): void {
    if (use === undefined || use === 'none') return;
    grantKeyUse(grantee, this.all, keyActions[use]);
  }
}

export interface HmacKeyProps {
  readonly environment: string;
  readonly retain: boolean;
  /** The alias is `alias/svcnum-<environment>/<name>`. */
  readonly name: string;
  /** What it is for, in the key's description. */
  readonly purpose: string;
}

/**
 * A KMS HMAC_256 key (GENERATE_VERIFY_MAC); the key never leaves KMS. The stack has two, so that
 * holding one grants nothing over the other's tokens:
 * - the sign-in MAC key (`sign-in-mac`, MAC_KEY_ID): the sign-in form's CSRF token and the device
 *   cookie of a browser that signed in before (docs/security.md, "Failed sign-ins"); the pages only;
 * - the page-token key (`page-token`, PAGE_TOKEN_KEY_ID): the page-token key is derived from it
 *   (core/kernel/page-token.ts) by discover and the gRPC task, which must not mint device cookies.
 * Replacing one (a new key, a deploy) only invalidates what it signed: open sign-in forms and
 * device cookies (people sign in again, throttled like any new browser until they have), or page
 * tokens and resume cursors (clients list again from the first page, streams restart without a cursor).
 */
export class HmacKey extends Construct {
  readonly key: Key;
  readonly alias: Alias;

  constructor(scope: Construct, id: string, props: HmacKeyProps) {
    super(scope, id);
    this.key = new Key(this, 'Key', {
      description: `svcnum ${props.environment}: ${props.purpose}`,
      keySpec: KeySpec.HMAC_256,
      keyUsage: KeyUsage.GENERATE_VERIFY_MAC,
      // KMS cannot rotate HMAC keys automatically (cdk-nag's KMS5 applies to symmetric encryption keys only).
      enableKeyRotation: false,
      policy: adminOnlyKeyPolicy(),
      removalPolicy: statefulRemovalPolicy(props.retain),
      pendingWindow: Duration.days(props.retain ? 30 : 7),
    });
    this.alias = new Alias(this, 'Alias', {
      aliasName: `alias/svcnum-${props.environment}/${props.name}`,
      targetKey: this.key,
    });
  }

  /**
   * Exactly `actions` (lib/access.ts `mac` or `pageTokenMac`) on this key only, in the grantee's policy and the key's.
   */
  grant(grantee: IGrantable, actions: readonly MacAction[]): void {
    grantKeyUse(grantee, [this.key], actions);
  }
}

/** The stack's two HMAC keys. */
export interface MacKeys {
  readonly signIn: HmacKey;
  readonly pageToken: HmacKey;
}

/**
 * The RSA keys' variables a unit gets: only where lib/access.ts gives it a use of them (`rsaKeys`), so
 * that elsewhere no ring asks KMS for them.
 */
export function rsaKeyEnvironment(unit: ComputeAccess, keys: SigningKeys): Record<string, string> {
  if (!unit.rsaKeys || unit.rsaKeys === 'none') return {};
  return {
    KMS_RSA_KEY_ID: keys.active.keyArn,
    KMS_RSA_VERIFY_KEY_IDS: keys.published.map((key) => key.keyArn).join(','),
  };
}

/** The MAC-key variables a unit gets: exactly those of the keys lib/access.ts grants it. */
export function macKeyEnvironment(unit: ComputeAccess, keys: MacKeys): Record<string, string> {
  return {
    ...(unit.mac ? { MAC_KEY_ID: keys.signIn.key.keyArn } : {}),
    ...(unit.pageTokenMac ? { PAGE_TOKEN_KEY_ID: keys.pageToken.key.keyArn } : {}),
  };
}

/** Grants a unit exactly its MAC-key actions (lib/access.ts `mac`, `pageTokenMac`), each on its key only. */
export function grantMacKeys(grantee: IGrantable, unit: ComputeAccess, keys: MacKeys): void {
  if (unit.mac) keys.signIn.grant(grantee, unit.mac);
  if (unit.pageTokenMac) keys.pageToken.grant(grantee, unit.pageTokenMac);
}
