import { CloudFormationClient, DescribeStacksCommand, type Stack } from '@aws-sdk/client-cloudformation';
import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { createDynamoStore } from '../core/adapters/dynamo-store';
import { documentClient } from '../core/adapters/dynamo-schema';
import type { Store } from '../core/store';
import { tableNames, type TableNames } from '../core/tables';
import { outputNames, stackName, type EnvironmentName } from '../lib/config';
import { SETTINGS_VARIABLE, settingsRegion } from '../lib/settings';

// The admin CLI against a deployed environment (`--env sandbox|production`): the table names
// come from the stack's outputs (DescribeStacks on svcnum-<env>), never from a guess, and the
// operator's own AWS credentials (default provider chain) do the work.

export interface DeployedEnvironment {
  environment: EnvironmentName;
  stackName: string;
  /** Region of the stack's tables (its `Region` output). */
  region: string;
  tablePrefix: string;
  tables: TableNames;
}

export interface DeployedOptions {
  /** A CloudFormation client (tests); by default one for `region`. */
  cloudFormation?: CloudFormationClient;
  /** Where the stack is: AWS_REGION, else AWS_DEFAULT_REGION, else the settings file's region. */
  region?: string;
}

/**
 * The region to look for an environment's stack in: AWS_REGION, else AWS_DEFAULT_REGION, else the
 * environment's region in the settings file that SVCNUM_SETTINGS or cdk.json's `settings` names.
 */
export function deployedRegion(
  environment: EnvironmentName,
  env: Record<string, string | undefined> = process.env,
): string {
  const region = env.AWS_REGION || env.AWS_DEFAULT_REGION || settingsRegion(environment, env);
  if (!region)
    throw new Error(
      `--env ${environment}: which region? Set AWS_REGION, or name your settings file in ${SETTINGS_VARIABLE} (or ` +
        `"settings" in cdk.json)`,
    );
  return region;
}

const SETTLED = /_COMPLETE$/;

/** Reads the stack's outputs and derives every physical table name from its TablePrefix. */
export async function describeDeployedEnvironment(
  environment: EnvironmentName,
  options: DeployedOptions = {},
): Promise<DeployedEnvironment> {
  const region = options.region ?? deployedRegion(environment);
  const client = options.cloudFormation ?? new CloudFormationClient({ region });
  const name = stackName(environment);
  let stack: Stack | undefined;
  try {
    stack = (await client.send(new DescribeStacksCommand({ StackName: name }))).Stacks?.[0];
  } catch (error) {
    if (
      (error as { name?: string }).name === 'ValidationError' &&
      /does not exist/.test(String((error as Error).message))
    ) {
      throw new Error(`--env ${environment}: no stack ${name} in ${region} (deploy it first, or set AWS_REGION)`);
    }
    throw error;
  } finally {
    if (!options.cloudFormation) client.destroy();
  }
  if (!stack) throw new Error(`--env ${environment}: no stack ${name} in ${region}`);
  const status = stack.StackStatus ?? 'UNKNOWN';
  if (!SETTLED.test(status) || /^(DELETE|ROLLBACK)_/.test(status)) {
    throw new Error(`--env ${environment}: stack ${name} is ${status}; wait until it is deployed`);
  }
  const outputs = new Map((stack.Outputs ?? []).map((output) => [output.OutputKey, output.OutputValue]));
  const prefix = outputs.get(outputNames.tablePrefix);
  if (!prefix || !/^[A-Za-z0-9_.-]{1,200}$/.test(prefix)) {
    throw new Error(`--env ${environment}: stack ${name} has no usable ${outputNames.tablePrefix} output`);
  }
  return {
    environment,
    stackName: name,
    region: outputs.get(outputNames.region) || region,
    tablePrefix: prefix,
    tables: tableNames(prefix),
  };
}

/** Runs `work` with a store on the environment's real tables. */
export async function withDeployedStore<T>(
  environment: EnvironmentName,
  work: (store: Store) => Promise<T>,
  options: DeployedOptions = {},
): Promise<T> {
  const deployed = await describeDeployedEnvironment(environment, options);
  const client = new DynamoDBClient({ region: deployed.region });
  try {
    return await work(createDynamoStore(documentClient(client), deployed.tables));
  } finally {
    client.destroy();
  }
}
