import { z } from 'zod';

// The schema of an environment's section of the settings file (lib/settings.ts reads and checks the
// file with it). Apart from settings.ts so that lib/config.ts can take the parsed type without
// importing settings.ts, which imports config.ts (no import cycle, types included).

const dnsName = z
  .string()
  .regex(/^(?=.{1,253}$)([a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?\.)+[a-z][a-z0-9-]{1,62}$/, 'a lower-case DNS name');
const certificateArn = z
  .string()
  .regex(
    /^arn:aws[a-z-]*:acm:[a-z0-9-]+:\d{12}:certificate\/[0-9a-f-]{36}$/,
    'an ACM certificate ARN (arn:aws:acm:<region>:<account>:certificate/<id>)',
  );
const hostedZone = z.strictObject({
  id: z.string().regex(/^Z[A-Z0-9]{1,31}$/, 'a Route 53 hosted zone id (Z…)'),
  name: dnsName,
});
const customDomain = z.strictObject({ domainName: dnsName, certificateArn, hostedZone: hostedZone.optional() });
const ipv4Cidr = z
  .string()
  .regex(
    /^((25[0-5]|2[0-4]\d|1?\d?\d)\.){3}(25[0-5]|2[0-4]\d|1?\d?\d)\/(3[0-2]|[12]?\d)$/,
    'an IPv4 CIDR such as 203.0.113.0/24',
  );
const httpsUrl = z.string().regex(/^https:\/\/[^\s/]+(\/\S*)?$/, 'an https:// URL');
const topicArn = z.string().regex(/^arn:aws[a-z-]*:sns:[a-z0-9-]+:\d{12}:[A-Za-z0-9_-]{1,256}$/, 'an SNS topic ARN');

const alarms = z
  .strictObject({
    emails: z.array(z.email('an e-mail address')).optional(),
    httpsEndpoints: z.array(httpsUrl).optional(),
    // Also targets of the ElastiCache events rule, which takes 5 targets (the alarm topic is one).
    topicArns: z.array(topicArn).max(4, 'at most 4 existing topics').optional(),
  })
  .refine((value) => [value.emails, value.httpsEndpoints, value.topicArns].some((list) => (list?.length ?? 0) > 0), {
    message: 'needs at least one destination: emails, httpsEndpoints or topicArns',
  });

const environmentSettings = z.strictObject({
  account: z.string().regex(/^\d{12}$/, 'a 12-digit AWS account id'),
  region: z.string().regex(/^[a-z]{2}(-[a-z]+)+-\d+$/, 'an AWS region such as eu-central-1'),
  availabilityZones: z.tuple([z.string(), z.string()]).optional(),
  api: customDomain,
  grpc: customDomain.extend({ allowedCidrs: z.array(ipv4Cidr).min(1, 'at least one CIDR') }),
  alarms,
  publicReservedConcurrency: z
    .int('a whole number')
    .min(1, 'at least 1 (and leave the account 100 unreserved)')
    .max(10_000, 'at most 10000'),
});

/**
 * The sandbox may go without a custom domain (the issuer is then the execute-api URL; see
 * lib/config.ts), and without a reservation (`publicReservedConcurrency: 0`), for a new account
 * whose concurrency quota is still below 100.
 */
export const schemas = {
  sandbox: environmentSettings.extend({
    api: customDomain.optional(),
    publicReservedConcurrency: z
      .int('a whole number')
      .min(0, 'at least 0 (0: no reservation)')
      .max(10_000, 'at most 10000'),
  }),
  production: environmentSettings,
} as const;

export type EnvironmentSettings = z.infer<typeof schemas.sandbox>;
