import { Duration } from 'aws-cdk-lib';
import { Alarm, ComparisonOperator, TreatMissingData } from 'aws-cdk-lib/aws-cloudwatch';
import { LambdaApplication, LambdaDeploymentConfig, LambdaDeploymentGroup } from 'aws-cdk-lib/aws-codedeploy';
import { Role, ServicePrincipal } from 'aws-cdk-lib/aws-iam';
import type { Alias } from 'aws-cdk-lib/aws-lambda';
import { Construct } from 'constructs';
import type { RouteGroup } from '../lambdas/manifest';
import type { EnvironmentConfig } from './config';

// How a new version of a route group function reaches its traffic (config.lambdaReleases). Every
// function's `live` alias (lib/http-api.ts) is what API Gateway invokes. With `canary`, CodeDeploy
// moves it: 10 % of invocations go to the new version for 5 minutes, then all; the alias's own error
// and p99 duration alarms (per minute, so that they can fire inside the 5 minutes) stop the release
// and move the alias back. With `all-at-once`, CloudFormation moves the alias as it publishes the
// version. Its alarms notify the operators as every alarm does (lib/monitoring.ts notifyOperators).

export interface LambdaReleasesProps {
  readonly config: EnvironmentConfig;
  readonly aliases: Record<RouteGroup, Alias>;
}

export class LambdaReleases extends Construct {
  /** The deployment group of each function (canary releases only). */
  readonly deploymentGroups: Partial<Record<RouteGroup, LambdaDeploymentGroup>> = {};
  /** The alarms that roll a function's release back (canary releases only). */
  readonly rollbackAlarms: Partial<Record<RouteGroup, Alarm[]>> = {};

  constructor(scope: Construct, id: string, props: LambdaReleasesProps) {
    super(scope, id);
    const { config } = props;
    const release = config.lambdaReleases;
    if (release.traffic === 'all-at-once') return;
    const prefix = `svcnum-${config.name}`;
    const application = new LambdaApplication(this, 'Application', { applicationName: `${prefix}-http` });
    // One role for every group: the AWS-documented policy for Lambda deployments (lib/nag.ts).
    const role = new Role(this, 'DeployRole', {
      assumedBy: new ServicePrincipal('codedeploy.amazonaws.com'),
      description: `${prefix}: CodeDeploy shifting the route group functions' live aliases`,
    });
    const minute = Duration.minutes(1);

    for (const [group, alias] of Object.entries(props.aliases) as Array<[RouteGroup, Alias]>) {
      const name = `${group[0]!.toUpperCase()}${group.slice(1)}`;
      const alarm = (
        alarmId: string,
        options: {
          description: string;
          metric: ReturnType<Alias['metricErrors']>;
          threshold: number;
          periods: number;
          datapoints: number;
          comparison: ComparisonOperator;
        },
      ) => {
        const created = new Alarm(this, alarmId, {
          alarmName: `${prefix}-${alarmId}`,
          alarmDescription: options.description,
          metric: options.metric,
          threshold: options.threshold,
          evaluationPeriods: options.periods,
          datapointsToAlarm: options.datapoints,
          comparisonOperator: options.comparison,
          treatMissingData: TreatMissingData.NOT_BREACHING,
        });
        return created;
      };
      const alarms = [
        alarm(`${name}ReleaseErrors`, {
          description:
            `The ${group} function's live alias failed ${release.rollbackErrors}+ times in a minute` +
            ' (a release in progress rolls back)',
          metric: alias.metricErrors({ period: minute, statistic: 'Sum' }),
          threshold: release.rollbackErrors,
          periods: 1,
          datapoints: 1,
          comparison: ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
        }),
        alarm(`${name}ReleaseLatencyP99`, {
          description:
            `The ${group} function's live alias took more than ${release.rollbackP99Ms[group]} ms at p99` +
            ' (a release in progress rolls back)',
          metric: alias.metricDuration({ period: minute, statistic: 'p99' }),
          threshold: release.rollbackP99Ms[group],
          periods: 3,
          datapoints: 2,
          comparison: ComparisonOperator.GREATER_THAN_THRESHOLD,
        }),
      ];
      this.rollbackAlarms[group] = alarms;
      this.deploymentGroups[group] = new LambdaDeploymentGroup(this, `${name}Deployment`, {
        application,
        deploymentGroupName: `${prefix}-${group}`,
        alias,
        role,
        deploymentConfig: LambdaDeploymentConfig.CANARY_10PERCENT_5MINUTES,
        alarms,
        autoRollback: { failedDeployment: true, stoppedDeployment: true, deploymentInAlarm: true },
      });
    }
  }
}
