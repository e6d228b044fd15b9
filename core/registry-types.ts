import { type GrantType, type ServedGrant, serveGrant } from './kernel/grant-type';
import type { ModulePorts } from './infrastructure';

// The registry's type machinery (core/registry.ts holds the wiring): what a module definition is,
// what building a list of them yields, and which store a process must provide for them.

/** A module's needs: the definitions of the modules it is given, by the name its factory uses. */
export type ModuleNeeds = { readonly [name: string]: AnyModuleDefinition };

/**
 * A module: its name, the modules it needs, and its factory (given only the ports and needs it
 * declares, and the grant types its needs add). `Port`, read from the factory's `store` parameter,
 * is the store methods it calls. `create` is a method so that every definition is an
 * AnyModuleDefinition (methods compare their parameters both ways).
 */
export interface ModuleDefinition<
  Name extends string = string,
  Needs extends ModuleNeeds = ModuleNeeds,
  Built = unknown,
  Port = object,
> {
  readonly name: Name;
  readonly needs: Needs;
  create(ports: ModulePorts & { store: Port }, needs: BuiltModules<Needs>, grants: readonly ServedGrant[]): Built;
  /** Grant types this module adds to the token endpoint; each handler is given the module as built. */
  readonly grants?: readonly GrantType<Built>[];
}

/** Any definition: what lists of modules hold. */
export type AnyModuleDefinition = ModuleDefinition;

/** What a definition's factory returns. */
type BuiltModule<D> = D extends { create(...args: never[]): infer Built } ? Built : never;
export type BuiltModules<Needs extends ModuleNeeds> = { -readonly [K in keyof Needs]: BuiltModule<Needs[K]> };
/** A list of definitions, built: name → module. */
export type ModulesOf<D extends readonly AnyModuleDefinition[]> = { [M in D[number] as M['name']]: BuiltModule<M> };

type Intersection<U> = (U extends unknown ? (value: U) => void : never) extends (value: infer I) => void ? I : never;
/** The store methods a definition and everything it needs call. */
type PortOf<D> =
  D extends ModuleDefinition<string, infer Needs, unknown, infer Port>
    ? Port & Intersection<{ [K in keyof Needs]: PortOf<Needs[K]> }[keyof Needs]>
    : never;
/**
 * The store a process building `definitions` must provide: exactly the methods their ports name.
 * A Lambda gives only the adapter slices that serve it (lambdas/runtime.ts), so its bundle holds no other.
 */
export type StoreOf<D extends readonly AnyModuleDefinition[]> = Intersection<PortOf<D[number]>>;

type IsAny<T> = 0 extends 1 & T ? true : false;
/**
 * Fixes a definition's types; the factory's own parameter types are checked against the ports and
 * needs. A store port typed `any` is refused: it would let StoreOf accept any store slices.
 */
export const defineModule = <Name extends string, Needs extends ModuleNeeds, Built, Port = object>(
  definition: ModuleDefinition<Name, Needs, Built, Port> &
    (IsAny<Port> extends true ? { storePortMustBeNamed: never } : unknown),
): ModuleDefinition<Name, Needs, Built, Port> => definition;

/** The grant types `modules` add (their definitions' `grants`), in their order. */
export const grantsOf = (modules: ModuleNeeds): readonly GrantType<unknown>[] =>
  Object.values(modules).flatMap((definition) => definition.grants ?? []);

/** Those grant types, each served with its module as built (`built`, by the same names). */
export const servedGrantsOf = (modules: ModuleNeeds, built: Readonly<Record<string, unknown>>): ServedGrant[] =>
  Object.entries(modules).flatMap(([name, definition]) =>
    (definition.grants ?? []).map((grant) => serveGrant(grant, built[name])),
  );
