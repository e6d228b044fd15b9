import { RemovalPolicy, Stack } from 'aws-cdk-lib';
import {
  AccessLogField,
  AccessLogFormat,
  DomainName,
  EndpointType,
  LambdaIntegration,
  LogGroupLogDestination,
  MethodLoggingLevel,
  ResponseType,
  RestApi,
  SecurityPolicy,
} from 'aws-cdk-lib/aws-apigateway';
import { Certificate } from 'aws-cdk-lib/aws-certificatemanager';
import { PolicyStatement, Role, ServicePrincipal } from 'aws-cdk-lib/aws-iam';
import { Alias, Tracing } from 'aws-cdk-lib/aws-lambda';
import { NodejsFunction } from 'aws-cdk-lib/aws-lambda-nodejs';
import { LogGroup } from 'aws-cdk-lib/aws-logs';
import { ApiGatewayDomain } from 'aws-cdk-lib/aws-route53-targets';
import type { CfnWebACL } from 'aws-cdk-lib/aws-wafv2';
import { aliasRecord } from './dns';
import { Construct } from 'constructs';
import type { TableKey } from '../core/tables';
import { routeGroupNames, routeManifest, type RouteGroup } from '../lambdas/manifest';
import { access, type ComputeUnit } from './access';
import type { EnvironmentConfig } from './config';
import { grantTableAccess, type GrantTarget } from './grants';
import { grantMacKeys, macKeyEnvironment, rsaKeyEnvironment, type MacKeys, type SigningKeys } from './keys';
import { logRetention, nodejsFunctionProps, statefulRemovalPolicy } from './util';
import { ApiFirewall } from './waf';

// The HTTP face: an API Gateway REST API (WAF attaches to REST APIs, not HTTP APIs) with every
// route of lambdas/manifest.ts mapped to its route group's function, a regional WAF web ACL,
// access logs, stage throttling and an optional custom domain.

export interface HttpApiProps {
  readonly config: EnvironmentConfig;
  readonly tables: Record<TableKey, GrantTarget>;
  readonly tablePrefix: string;
  readonly keys: SigningKeys;
  /** The RSA keys of RS256 ID tokens, for the units lib/access.ts names (`rsaKeys`). */
  readonly rsaKeys: SigningKeys;
  /** The sign-in MAC key and the page-token key, each for the units lib/access.ts names. */
  readonly macKeys: MacKeys;
  /** Environment shared by the Lambda functions and the Fargate task (ISSUER excluded). */
  readonly sharedEnvironment: Record<string, string>;
}

/** Paths rate-limited per IP by the WAF as public endpoints: the public route group's. */
export const PUBLIC_API_PATHS = Object.keys(routeManifest.public.routes);

export class HttpApi extends Construct {
  readonly api: RestApi;
  readonly functions: Record<RouteGroup, NodejsFunction>;
  /**
   * Each function's `live` alias: what API Gateway invokes. It points at the function's current
   * version, published anew whenever its code or configuration changes; lib/releases.ts moves it.
   */
  readonly aliases: Record<RouteGroup, Alias>;
  readonly webAcl: CfnWebACL;
  readonly issuer: string;
  readonly domain?: DomainName;

  constructor(scope: Construct, id: string, props: HttpApiProps) {
    super(scope, id);
    const { config } = props;
    const stack = Stack.of(this);
    const prefix = `svcnum-${config.name}`;
    const removalPolicy = statefulRemovalPolicy(config.retainData);
    const customDomain = config.http.customDomain;

    this.api = this.restApi(config, prefix, removalPolicy);

    this.issuer = customDomain
      ? `https://${customDomain.domainName}`
      : `https://${this.api.restApiId}.execute-api.${stack.region}.${stack.urlSuffix}/${config.http.stageName}`;

    const environment = { ...props.sharedEnvironment, ISSUER: this.issuer };
    const served = this.routeGroups(props, environment, removalPolicy);
    this.functions = served.functions;
    this.aliases = served.aliases;

    if (customDomain) this.domain = this.customDomainName(customDomain);

    // Id 'Default' is left out of logical ids: the web ACL, its log group, logging configuration
    // and association keep the ids they had when defined here inline. They have fixed names, so
    // new ids would make CloudFormation create a second ACL and log group of the same name first.
    this.webAcl = new ApiFirewall(this, 'Default', {
      config,
      stage: this.api.deploymentStage,
      publicApiPaths: PUBLIC_API_PATHS,
    }).webAcl;
  }

  /** The REST API: regional, access logs without query, header or body, error-level execution logs, throttling. */
  private restApi(config: EnvironmentConfig, prefix: string, removalPolicy: RemovalPolicy): RestApi {
    const accessLogs = new LogGroup(this, 'AccessLogs', {
      logGroupName: `/aws/apigateway/${prefix}/access`,
      retention: logRetention(config.logRetentionDays),
      removalPolicy,
    });

    const api = new RestApi(this, 'Api', {
      restApiName: prefix,
      description: `svcnum ${config.name}: OAuth 2.0 / OpenID Connect endpoints and sign-in pages`,
      // Regional, not edge-optimised: the WAF's per-IP rules must see the caller's address,
      // not a CloudFront edge's.
      endpointConfiguration: { types: [EndpointType.REGIONAL] },
      // With a custom domain the issuer is that domain; the execute-api URL would be a second,
      // wrong issuer, so it is switched off.
      disableExecuteApiEndpoint: config.http.customDomain !== undefined,
      // The account-level role that lets API Gateway write execution logs (ERROR level below).
      cloudWatchRole: true,
      cloudWatchRoleRemovalPolicy: RemovalPolicy.RETAIN,
      deployOptions: {
        stageName: config.http.stageName,
        accessLogDestination: new LogGroupLogDestination(accessLogs),
        // No query string, header or body: they may carry codes, tokens or personal data.
        accessLogFormat: AccessLogFormat.custom(
          JSON.stringify({
            requestId: AccessLogField.contextRequestId(),
            extendedRequestId: AccessLogField.contextExtendedRequestId(),
            ip: AccessLogField.contextIdentitySourceIp(),
            requestTime: AccessLogField.contextRequestTimeEpoch(),
            method: AccessLogField.contextHttpMethod(),
            resource: AccessLogField.contextResourcePath(),
            status: AccessLogField.contextStatus(),
            responseLength: AccessLogField.contextResponseLength(),
            responseLatency: AccessLogField.contextResponseLatency(),
            integrationLatency: AccessLogField.contextIntegrationLatency(),
            wafStatus: AccessLogField.contextWafResponseCode(),
            userAgent: AccessLogField.contextIdentityUserAgent(),
          }),
        ),
        loggingLevel: MethodLoggingLevel.ERROR,
        dataTraceEnabled: false,
        metricsEnabled: false,
        tracingEnabled: config.http.tracing,
        throttlingRateLimit: config.http.throttle.rateLimit,
        throttlingBurstLimit: config.http.throttle.burstLimit,
        // Per-method metrics only where an alarm needs them: the token endpoint's p99 latency.
        // (A method's own setting replaces the stage's, so it repeats logging and throttling.)
        methodOptions: {
          '/oauth/token/POST': {
            metricsEnabled: true,
            loggingLevel: MethodLoggingLevel.ERROR,
            dataTraceEnabled: false,
            throttlingRateLimit: config.http.throttle.rateLimit,
            throttlingBurstLimit: config.http.throttle.burstLimit,
          },
        },
      },
    });
    // The stack exports its own URLs (lib/service-stack.ts); with a custom domain the
    // execute-api URL is switched off and must not be advertised.
    api.node.tryRemoveChild('Endpoint');
    // Unknown paths: the same JSON 404 the handlers give, not API Gateway's misleading 403.
    api.addGatewayResponse('NotFound', {
      type: ResponseType.MISSING_AUTHENTICATION_TOKEN,
      statusCode: '404',
      responseHeaders: { 'Content-Type': "'application/json'", 'Cache-Control': "'no-store'" },
      templates: { 'application/json': '{"error":"not_found","error_description":"no such endpoint"}' },
    });
    return api;
  }

  /** One function per route group, each behind its `live` alias, with its grants and its routes on the API. */
  private routeGroups(props: HttpApiProps, environment: Record<string, string>, removalPolicy: RemovalPolicy) {
    const functions = {} as Record<RouteGroup, NodejsFunction>;
    const aliases = {} as Record<RouteGroup, Alias>;
    for (const group of routeGroupNames) {
      const fn = this.routeGroupFunction(
        group,
        props.config,
        {
          ...environment,
          ...macKeyEnvironment(access[group], props.macKeys),
          ...rsaKeyEnvironment(access[group], props.rsaKeys),
        },
        removalPolicy,
      );
      grantTableAccess(fn, group satisfies ComputeUnit, props.tables);
      props.keys.grant(fn, accessKeyUse(group));
      props.rsaKeys.grant(fn, access[group].rsaKeys);
      grantMacKeys(fn, access[group], props.macKeys);
      // API Gateway invokes the alias, never $LATEST: its permissions are the alias's too. A version
      // is a snapshot of code and configuration; currentVersion publishes a new one whenever either
      // changes in the template (a key change shows there as a new key ARN, never only as a new
      // KMS_PUBLIC_KEYS value: lib/public-keys.ts re-reads keys exactly when the key set changes).
      const alias = new Alias(this, `${pascal(group)}Live`, { aliasName: LIVE_ALIAS, version: fn.currentVersion });
      const integration = new LambdaIntegration(alias, { allowTestInvoke: false });
      for (const [path, methods] of Object.entries(routeManifest[group].routes)) {
        const resource = this.api.root.resourceForPath(path);
        for (const method of methods as readonly string[]) resource.addMethod(method, integration);
      }
      functions[group] = fn;
      aliases[group] = alias;
    }
    return { functions, aliases };
  }

  /** The custom domain (TLS 1.2, regional) mapped to the API, and its alias record when the zone is given. */
  private customDomainName(customDomain: NonNullable<EnvironmentConfig['http']['customDomain']>): DomainName {
    const domain = new DomainName(this, 'Domain', {
      domainName: customDomain.domainName,
      certificate: Certificate.fromCertificateArn(this, 'Certificate', customDomain.certificateArn),
      endpointType: EndpointType.REGIONAL,
      securityPolicy: SecurityPolicy.TLS_1_2,
      mapping: this.api,
    });
    if (customDomain.hostedZone) {
      aliasRecord(this, 'DomainRecord', customDomain.hostedZone, customDomain.domainName, new ApiGatewayDomain(domain));
    }
    return domain;
  }

  private routeGroupFunction(
    group: RouteGroup,
    config: EnvironmentConfig,
    environment: Record<string, string>,
    removalPolicy: RemovalPolicy,
  ) {
    const name = `svcnum-${config.name}-${group}`;
    const settings = config.http.functions[group];
    const logGroup = new LogGroup(this, `${pascal(group)}Logs`, {
      logGroupName: `/aws/lambda/${name}`,
      retention: logRetention(config.logRetentionDays),
      removalPolicy,
    });
    // An own role instead of AWSLambdaBasicExecutionRole: logs go to this function's group only.
    const role = new Role(this, `${pascal(group)}Role`, {
      assumedBy: new ServicePrincipal('lambda.amazonaws.com'),
      description: `svcnum ${config.name}: the ${group} route group function`,
    });
    role.addToPolicy(
      new PolicyStatement({
        actions: ['logs:CreateLogStream', 'logs:PutLogEvents'],
        resources: [logGroup.logGroupArn],
      }),
    );
    return new NodejsFunction(this, `${pascal(group)}Function`, {
      ...nodejsFunctionProps({
        entry: routeManifest[group].entry,
        memoryMiB: settings.memoryMiB,
        timeoutSeconds: settings.timeoutSeconds,
        role,
        logGroup,
      }),
      functionName: name,
      description: `svcnum ${config.name}: ${describedRoutes(Object.keys(routeManifest[group].routes))}`,
      tracing: config.http.tracing ? Tracing.ACTIVE : Tracing.DISABLED,
      // A release replaces the version resource; the old version must outlive that update, or the
      // alias could not be moved back to it (docs/deploying.md, "A rollback").
      currentVersionOptions: { removalPolicy: RemovalPolicy.RETAIN },
      // `public` (unauthenticated) is capped, so it cannot take sign-in's and tokens' concurrency.
      ...(settings.reservedConcurrency ? { reservedConcurrentExecutions: settings.reservedConcurrency } : {}),
      environment: { ...environment, ...groupEnvironment(group, config), SERVICE_NAME: functionServiceName(group) },
    });
  }
}

/** The alias of every route group function that API Gateway invokes. */
export const LIVE_ALIAS = 'live';

/** SERVICE_NAME of a route group's function: the `service` of its log lines and the dimension of its metrics. */
export const functionServiceName = (group: RouteGroup) => `svcnum-${group}`;

/** What each route group does with the signing keys (lib/access.ts). */
const accessKeyUse = (unit: ComputeUnit) => access[unit].keys;

/**
 * Environment only one group reads: the public endpoints' in-process per-IP limiter (the second
 * line behind the WAF rule) gets the WAF's rate, per minute, so that the two lines agree.
 */
function groupEnvironment(group: RouteGroup, config: EnvironmentConfig): Record<string, string> {
  if (group !== 'public') return {};
  const perMinute = Math.max(1, Math.round((config.waf.publicApiRateLimit * 60) / config.waf.evaluationWindowSeconds));
  return { PUBLIC_RATE_LIMIT_PER_MINUTE: String(perMinute) };
}

const pascal = (name: string) => `${name[0]!.toUpperCase()}${name.slice(1)}`;

/** A function's routes for its description (256 characters at most): paths under a listed one fold into it. */
function describedRoutes(paths: string[]): string {
  const under = (path: string, parent: string) => path.startsWith(`${parent}/`);
  return paths
    .filter((path) => !paths.some((parent) => under(path, parent)))
    .map((path) => (paths.some((child) => under(child, path)) ? `${path}…` : path))
    .join(', ');
}
