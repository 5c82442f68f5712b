// Measurements taken in turn: in the given order in even rounds and reversed in odd ones,
// so a drift of the machine within a round favours none of them.

export function inTurn<T>(items: readonly T[], round: number): readonly T[] {
  return round % 2 === 0 ? items : [...items].reverse();
}
