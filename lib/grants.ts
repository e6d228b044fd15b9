import { PolicyStatement, type IGrantable } from 'aws-cdk-lib/aws-iam';
import type { TableKey } from '../core/tables';
import { access, type ComputeUnit } from './access';

/** What a grant needs of a table. */
export interface GrantTarget {
  readonly tableArn: string;
}

/**
 * Grants a compute unit exactly the DynamoDB actions of lib/access.ts: item actions on the
 * table ARN, Query on the named index ARNs. No wildcard actions, no `index/*`.
 */
export function grantTableAccess(grantee: IGrantable, unit: ComputeUnit, tables: Record<TableKey, GrantTarget>): void {
  for (const [key, tableAccess] of Object.entries(access[unit].tables)) {
    const table = tables[key as TableKey];
    if (tableAccess.actions.length > 0) {
      grantee.grantPrincipal.addToPrincipalPolicy(
        new PolicyStatement({
          actions: tableAccess.actions.map((action) => `dynamodb:${action}`),
          resources: [table.tableArn],
        }),
      );
    }
    if (tableAccess.queryIndexes?.length) {
      grantee.grantPrincipal.addToPrincipalPolicy(
        new PolicyStatement({
          actions: ['dynamodb:Query'],
          resources: tableAccess.queryIndexes.map((index) => `${table.tableArn}/index/${index}`),
        }),
      );
    }
  }
}
