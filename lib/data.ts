import { AttributeType, BillingMode, Table, type StreamViewType } from 'aws-cdk-lib/aws-dynamodb';
import { Construct } from 'constructs';
import { tableDefinitions, tableNames, type TableDefinition, type TableKey } from '../core/tables';
import { statefulRemovalPolicy } from './util';

// Every DynamoDB table of core/tables.ts (the one definition the local bootstrap uses too):
// on-demand, string keys, the GSIs and TTL attribute as defined, point-in-time recovery on.

export interface DataProps {
  readonly tablePrefix: string;
  /** Retain tables on updates and deletes, not after a failed create (lib/util.ts statefulRemovalPolicy). */
  readonly retain: boolean;
  readonly deletionProtection: boolean;
  /** DynamoDB Streams of these tables (the messages table's feeds the wake-up relay, lib/wakeup-relay.ts). */
  readonly streams?: Partial<Record<TableKey, StreamViewType>>;
}

const stringKey = (name: string) => ({ name, type: AttributeType.STRING });

export class Data extends Construct {
  readonly tables: Record<TableKey, Table>;
  readonly tablePrefix: string;

  constructor(scope: Construct, id: string, props: DataProps) {
    super(scope, id);
    this.tablePrefix = props.tablePrefix;
    const names = tableNames(props.tablePrefix);
    const tables = {} as Record<TableKey, Table>;
    for (const key of Object.keys(tableDefinitions) as TableKey[]) {
      const definition: TableDefinition = tableDefinitions[key];
      const table = new Table(this, tableId(key), {
        tableName: names[key],
        partitionKey: stringKey(definition.partitionKey),
        ...(definition.sortKey ? { sortKey: stringKey(definition.sortKey) } : {}),
        billingMode: BillingMode.PAY_PER_REQUEST,
        ...(definition.ttlAttribute ? { timeToLiveAttribute: definition.ttlAttribute } : {}),
        ...(props.streams?.[key] ? { stream: props.streams[key] } : {}),
        pointInTimeRecoverySpecification: { pointInTimeRecoveryEnabled: true },
        deletionProtection: props.deletionProtection,
        removalPolicy: statefulRemovalPolicy(props.retain),
      });
      for (const index of definition.indexes ?? []) {
        table.addGlobalSecondaryIndex({
          indexName: index.name,
          partitionKey: stringKey(index.partitionKey),
          ...(index.sortKey ? { sortKey: stringKey(index.sortKey) } : {}),
        });
      }
      tables[key] = table;
    }
    this.tables = tables;
  }
}

/** Construct id of a table: `Clients`, `AuthRequests`, … (stable logical ids). */
export const tableId = (key: string) => `${key[0]!.toUpperCase()}${key.slice(1)}`;
