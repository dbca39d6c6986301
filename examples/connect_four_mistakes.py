"""Count a Connect Four policy's one-move mistakes against the look-ahead player: wins not taken, threats not
blocked, wins handed over.

    python examples/connect_four_mistakes.py runs/connect-four-selfplay [--games 200] [--policy default]

Prints one JSON object: games won, drawn and lost (the policy plays first in even games, second in odd ones),
the policy's moves, and how many of them were each mistake. The look-ahead player takes every win it is
offered, so a threat not blocked or a win handed over loses that game.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from connect_four_opponents import boards, one_step_lookahead, opponent_can_win, winning_moves  # noqa: E402

MISTAKES = ("missed_win", "missed_block", "gave_win")


def mistake(mine: np.ndarray, theirs: np.ndarray, legal: np.ndarray, column: int) -> str | None:
    """Which mistake playing `column` is, if any, on a board of this player's and the opponent's pieces [6, 7].

    'missed_win': a move made four and this one did not; 'missed_block': the opponent could make four next
    and this move did not stop it (where no win was on the board); 'gave_win': no such threat was there, this
    move made one, and another move would not have.
    """
    occupied = mine | theirs
    columns = np.flatnonzero(legal)
    winning = winning_moves(mine, occupied, columns)
    if winning:
        return None if column in winning else "missed_win"
    blocking = winning_moves(theirs, occupied, columns)
    if blocking:
        return None if column in blocking else "missed_block"
    safe = [c for c in columns if not opponent_can_win(mine, theirs, c)]
    return "gave_win" if safe and column not in safe else None


def play(policy, games: int) -> dict:
    from pettingzoo.classic import connect_four_v3

    counts = dict.fromkeys(MISTAKES, 0)
    results, moves = [], 0
    env = connect_four_v3.env()
    for game in range(games):
        env.reset(seed=game)
        seat = env.agents[game % 2]
        for agent in env.agent_iter():
            obs, reward, ended, cut, _ = env.last()
            if ended or cut:
                if agent == seat:
                    results.append(reward)
                env.step(None)
                continue
            x = policy.flatten_masked(obs)[None]  # the form both players read
            if agent != seat:
                env.step(int(one_step_lookahead(x)[0]))
                continue
            column = int(np.asarray(policy.act(x)).reshape(-1)[0])
            planes, legal = boards(x)
            kind = mistake(planes[0, ..., 0], planes[0, ..., 1], legal[0], column)
            moves += 1
            if kind:
                counts[kind] += 1
            env.step(column)
    env.close()
    scores = np.asarray(results)
    return {
        "games": len(scores),
        "won": int((scores > 0).sum()),
        "drawn": int((scores == 0).sum()),
        "lost": int((scores < 0).sum()),
        "moves": moves,
        **counts,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run", help="a run directory, checkpoint file or exported policy")
    parser.add_argument("--games", type=int, default=200)
    parser.add_argument("--policy", default=None, help="the policy's name in a run of several")
    args = parser.parse_args()
    if args.games < 1:
        parser.error(f"--games must be at least 1, got {args.games}")
    import tandem

    try:
        policy = tandem.load_policy(args.run, policy=args.policy, seed=0)
    except tandem.PolicyError as exc:
        parser.exit(2, f"connect_four_mistakes: {exc}\n")
    print(json.dumps(play(policy, args.games)))


if __name__ == "__main__":
    main()
