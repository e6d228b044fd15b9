import { ArnFormat, Stack } from 'aws-cdk-lib';
import type { Stage } from 'aws-cdk-lib/aws-apigateway';
import { LogGroup } from 'aws-cdk-lib/aws-logs';
import { CfnLoggingConfiguration, CfnWebACL, CfnWebACLAssociation } from 'aws-cdk-lib/aws-wafv2';
import { Construct } from 'constructs';
import type { EnvironmentConfig } from './config';
import { logRetention, statefulRemovalPolicy } from './util';

// The regional WAF web ACL in front of the REST API stage: per-IP rate rules (public endpoints,
// sign-in form posts, the sign-in page, any path) answering 429 with Retry-After, AWS's managed
// rule groups, and its logs without the credentials a request may carry.

export interface ApiFirewallProps {
  readonly config: EnvironmentConfig;
  /** The stage the web ACL protects. */
  readonly stage: Stage;
  /** Paths rate-limited per IP as public endpoints (no credential). */
  readonly publicApiPaths: readonly string[];
}

/** What the rules share: names, metrics and the 429 answers of one environment. */
interface RuleParts {
  readonly config: EnvironmentConfig;
  readonly prefix: string;
}

const visibility = ({ prefix }: RuleParts, metricName: string) => ({
  cloudWatchMetricsEnabled: true,
  sampledRequestsEnabled: true,
  metricName: `${prefix}-${metricName}`,
});

const rateLimited = ({ config }: RuleParts, customResponseBodyKey: 'rate-limited' | 'sign-in-rate-limited') => ({
  block: {
    customResponse: {
      responseCode: 429,
      customResponseBodyKey,
      responseHeaders: [{ name: 'Retry-After', value: String(config.waf.retryAfterSeconds) }],
    },
  },
});

// The path as API Gateway will route it: decoded, normalised, lower case. CONTAINS also
// covers the stage prefix of the execute-api URL (/v1/api/resolve).
const pathContains = (path: string): CfnWebACL.StatementProperty => ({
  byteMatchStatement: {
    fieldToMatch: { uriPath: {} },
    positionalConstraint: 'CONTAINS',
    searchString: path,
    textTransformations: [
      { priority: 0, type: 'URL_DECODE' },
      { priority: 1, type: 'NORMALIZE_PATH' },
      { priority: 2, type: 'LOWERCASE' },
    ],
  },
});

const count = (name: string) => ({ name, actionToUse: { count: {} } });

/** A per-IP rate rule, on every request or on those `scopeDownStatement` matches. */
function perIpRule(
  parts: RuleParts,
  rule: { name: string; priority: number; limit: number; body: 'rate-limited' | 'sign-in-rate-limited' },
  scopeDownStatement?: CfnWebACL.StatementProperty,
): CfnWebACL.RuleProperty {
  return {
    name: rule.name,
    priority: rule.priority,
    action: rateLimited(parts, rule.body),
    statement: {
      rateBasedStatement: {
        limit: rule.limit,
        aggregateKeyType: 'IP',
        evaluationWindowSec: parts.config.waf.evaluationWindowSeconds,
        ...(scopeDownStatement ? { scopeDownStatement } : {}),
      },
    },
    visibilityConfig: visibility(parts, rule.name),
  };
}

function signInRule(
  parts: RuleParts,
  name: string,
  priority: number,
  method: 'GET' | 'POST',
  limit: number,
): CfnWebACL.RuleProperty {
  return perIpRule(
    parts,
    { name, priority, limit, body: 'sign-in-rate-limited' },
    {
      andStatement: {
        statements: [
          pathContains('/login'),
          {
            byteMatchStatement: {
              fieldToMatch: { method: {} },
              positionalConstraint: 'EXACTLY',
              searchString: method,
              textTransformations: [{ priority: 0, type: 'NONE' }],
            },
          },
        ],
      },
    },
  );
}

/** The per-IP rate rules: public endpoints, sign-in form posts, the sign-in page, any path. */
function rateRules(parts: RuleParts, publicApiPaths: readonly string[]): CfnWebACL.RuleProperty[] {
  const { waf } = parts.config;
  return [
    perIpRule(
      parts,
      { name: 'public-api-per-ip', priority: 0, limit: waf.publicApiRateLimit, body: 'rate-limited' },
      { orStatement: { statements: publicApiPaths.map(pathContains) } },
    ),
    // Sign-in form posts (password checks), and apart from them the sign-in page itself
    // (each view without a valid token costs a KMS GenerateMac).
    signInRule(parts, 'sign-in-per-ip', 1, 'POST', waf.signInRateLimit),
    signInRule(parts, 'sign-in-page-per-ip', 2, 'GET', waf.signInPageRateLimit),
    perIpRule(parts, { name: 'any-path-per-ip', priority: 3, limit: waf.perIpRateLimit, body: 'rate-limited' }),
  ];
}

/** AWS's managed rule groups, with the rules our legitimate requests trip counted only. */
function managedRules(parts: RuleParts): CfnWebACL.RuleProperty[] {
  return [
    {
      name: 'aws-common-rule-set',
      priority: 4,
      overrideAction: { none: {} },
      statement: {
        managedRuleGroupStatement: {
          vendorName: 'AWS',
          name: 'AWSManagedRulesCommonRuleSet',
          ruleActionOverrides: [
            // /oauth/authorize legitimately carries up to 2048 characters of `state` plus a
            // nonce and a challenge: more than this rule's 2 KiB query string limit.
            count('SizeRestrictions_QUERYSTRING'),
            // Loopback redirect URIs (http://127.0.0.1:…/callback, RFC 8252 native apps) in
            // /oauth/authorize queries and /oauth/token bodies look like remote file inclusion.
            count('GenericRFI_QUERYARGUMENTS'),
            count('GenericRFI_BODY'),
            // POST /api/messages carries arbitrary user text (up to 2000 characters, which a
            // client may send \u-escaped: more than 8 KiB); the handlers cap bodies at 64 KiB.
            count('SizeRestrictions_BODY'),
            // Message texts and passwords are free text ("<b>", "<script>" included). The pages
            // escape all output and send CSP default-src 'none' (no script at all).
            count('CrossSiteScripting_BODY'),
          ],
        },
      },
      visibilityConfig: visibility(parts, 'aws-common-rule-set'),
    },
    {
      name: 'aws-known-bad-inputs',
      priority: 5,
      overrideAction: { none: {} },
      statement: { managedRuleGroupStatement: { vendorName: 'AWS', name: 'AWSManagedRulesKnownBadInputsRuleSet' } },
      visibilityConfig: visibility(parts, 'aws-known-bad-inputs'),
    },
  ];
}

const CUSTOM_RESPONSE_BODIES = {
  'rate-limited': {
    contentType: 'APPLICATION_JSON',
    content: '{"error":"rate_limited","error_description":"too many requests from this address; retry later"}',
  },
  // A person sees this one: a page, not JSON (no style or script: WAF serves it as is).
  'sign-in-rate-limited': {
    contentType: 'TEXT_HTML',
    content:
      '<!doctype html><html lang="en"><head><meta charset="utf-8"><title>Too many sign-in ' +
      'attempts</title></head>' +
      '<body><h1>Too many sign-in attempts</h1><p>Too many sign-in attempts came from your network. Wait a ' +
      'few minutes, then go back and try again.</p></body></html>',
  },
};

export class ApiFirewall extends Construct {
  readonly webAcl: CfnWebACL;

  constructor(scope: Construct, id: string, props: ApiFirewallProps) {
    super(scope, id);
    const { config } = props;
    const parts: RuleParts = { config, prefix: `svcnum-${config.name}` };
    const acl = new CfnWebACL(this, 'WebAcl', {
      name: `${parts.prefix}-api`,
      scope: 'REGIONAL',
      defaultAction: { allow: {} },
      visibilityConfig: visibility(parts, 'web-acl'),
      customResponseBodies: CUSTOM_RESPONSE_BODIES,
      rules: [...rateRules(parts, props.publicApiPaths), ...managedRules(parts)],
    });
    this.webAcl = acl;
    this.logRequests(parts, acl);
    new CfnWebACLAssociation(this, 'WebAclAssociation', {
      resourceArn: props.stage.stageArn,
      webAclArn: acl.attrArn,
    });
  }

  /**
   * WAF logs: every request the ACL evaluates (there is no logging filter), without the credentials
   * a request may carry.
   */
  private logRequests({ config, prefix }: RuleParts, acl: CfnWebACL): void {
    const wafLogs = new LogGroup(this, 'WafLogs', {
      logGroupName: `aws-waf-logs-${prefix}`,
      retention: logRetention(config.logRetentionDays),
      removalPolicy: statefulRemovalPolicy(config.retainData),
    });
    const logging = new CfnLoggingConfiguration(this, 'WafLogging', {
      resourceArn: acl.attrArn,
      // WAF wants the log group ARN without the `:*` suffix of Fn::GetAtt Arn.
      logDestinationConfigs: [
        Stack.of(this).formatArn({
          service: 'logs',
          resource: 'log-group',
          resourceName: wafLogs.logGroupName,
          arnFormat: ArnFormat.COLON_RESOURCE_NAME,
        }),
      ],
      redactedFields: [
        { singleHeader: { Name: 'authorization' } },
        { singleHeader: { Name: 'cookie' } },
        { queryString: {} },
      ],
    });
    logging.node.addDependency(wafLogs);
  }
}
