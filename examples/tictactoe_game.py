"""A two-player game that runs its own loop: Tic-Tac-Toe whose both seats ask Tandem's action server for moves.

    tandem up examples/game_tictactoe.toml           # learner + action server (+ an evaluator against random play)
    python examples/tictactoe_game.py --run-dir runs/game-tictactoe --games 4

Each game process plays boards one after another. Its two seats are two streams of one session (one `Agent` with
streams=2, so status counts one game per process): the seat to move asks for its move with the board as it sees
it, so one policy learns both seats by playing itself. Each seat's
reward arrives with its next request, or with the end of the game: +1 a win, -1 a loss, 0 a draw. The server has
no action mask, so a move onto a taken square ends the game: -1 for the seat that made it, 0 for the other.

`make_env` is the same game as a gymnasium env against a uniformly random legal player, seats drawn per episode:
the server and the learner take the spaces from it, and the evaluator measures the policy with it.
"""

from __future__ import annotations

import argparse
import sys
import time

import gymnasium as gym
import numpy as np

LINES = [(0, 1, 2), (3, 4, 5), (6, 7, 8), (0, 3, 6), (1, 4, 7), (2, 5, 8), (0, 4, 8), (2, 4, 6)]


class Board:
    """The game's own state: 9 squares, 0 empty, 1 and 2 the seats' marks; seat 0 moves first."""

    def __init__(self) -> None:
        self.squares = np.zeros(9, np.int8)
        self.to_move = 0

    def seen_by(self, seat: int) -> np.ndarray:
        """float32 [27]: for each square, one-hot (empty, mine, theirs) from `seat`'s side."""
        mine, theirs = seat + 1, 2 - seat
        view = np.stack([self.squares == 0, self.squares == mine, self.squares == theirs], axis=1)
        return view.astype(np.float32).reshape(-1)

    def play(self, square: int) -> str | None:
        """The mover's move: None while the game goes on, else 'win', 'draw' or 'illegal' (for the mover)."""
        if not 0 <= square < 9 or self.squares[square]:
            return "illegal"
        self.squares[square] = self.to_move + 1
        if any(all(self.squares[i] == self.to_move + 1 for i in line) for line in LINES):
            return "win"
        if self.squares.all():
            return "draw"
        self.to_move = 1 - self.to_move
        return None


# the mover's and the other seat's rewards for each way a game ends
OUTCOME = {"win": (1.0, -1.0), "draw": (0.0, 0.0), "illegal": (-1.0, 0.0)}


class TicTacToeVsRandom(gym.Env):
    """One seat of Tic-Tac-Toe (drawn per episode) against a uniformly random legal player; the spaces the
    server's games use."""

    observation_space = gym.spaces.Box(0.0, 1.0, (27,), np.float32)
    action_space = gym.spaces.Discrete(9)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.board, self.seat = Board(), int(self.np_random.integers(2))
        if self.seat == 1:
            self.board.play(self.random_move())
        return self.board.seen_by(self.seat), {}

    def random_move(self) -> int:
        return int(self.np_random.choice(np.flatnonzero(self.board.squares == 0)))

    def step(self, action):
        end = self.board.play(int(action))
        if end is None:
            reply = self.board.play(self.random_move())
            if reply is not None:
                return self.board.seen_by(self.seat), OUTCOME[reply][1], True, False, {}
            return self.board.seen_by(self.seat), 0.0, False, False, {}
        return self.board.seen_by(self.seat), OUTCOME[end][0], True, False, {}


def make_env(**_: object) -> gym.Env:
    return TicTacToeVsRandom()


def play_games(agent, seconds: float, ends: dict[str, int]) -> None:
    """Boards until `seconds` have passed; seat s is the agent's stream s, and its reward goes with its next
    request. `ends` counts how the boards ended: the first mover's wins, the second mover's, draws, illegal moves."""
    from tandem.client.game import AgentError

    deadline = time.monotonic() + seconds
    pending = [0.0, 0.0]  # each seat's reward since its last request
    while time.monotonic() < deadline:
        board = Board()
        while True:
            seat = board.to_move
            move = agent.act(board.seen_by(seat), pending[seat], stream=seat)
            if move is None:
                raise AgentError("protocol", "the server ended an episode the game had not ended")
            pending[seat] = 0.0
            end = board.play(int(move))
            if end is not None:
                break
        mover = board.to_move
        rewards = OUTCOME[end]
        for s in (mover, 1 - mover):  # both seats' episodes end with the board
            agent.act(board.seen_by(s), rewards[0] if s == mover else rewards[1], done=True, stream=s)
        how = end if end != "win" else ("first" if mover == 0 else "second")
        ends[how] = ends.get(how, 0) + 1


def play(index: int, run_dir: str, seconds: float, timeout_s: float) -> int:
    """One game process: both seats connected (one session), boards until the time is up or the run is over."""
    from tandem.client.game import Agent
    from tandem.client.game_sessions import play_sessions

    ends: dict[str, int] = {}

    def session(address: str, deadline: float) -> None:
        with Agent(address, game=f"tictactoe-{index}", timeout_s=timeout_s, streams=2) as agent:
            play_games(agent, deadline - time.monotonic(), ends)

    play_sessions(session, run_dir, seconds, f"game {index}")
    summary = ", ".join(f"{k} {v}" for k, v in sorted(ends.items()))
    sys.stdout.write(f"game {index}: {sum(ends.values())} boards ({summary})\n")  # one write: the games share stdout
    sys.stdout.flush()
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--run-dir", default="runs/game-tictactoe", help="The run's directory (the server's address).")
    parser.add_argument("--games", type=int, default=2, help="Game processes to start.")
    parser.add_argument("--seconds", type=float, default=300.0, help="How long each game plays.")
    parser.add_argument("--timeout-s", type=float, default=10.0, help="Longest wait for one move.")
    args = parser.parse_args()
    from tandem.client.game_sessions import run_game_processes

    return run_game_processes(play, [(i, args.run_dir, args.seconds, args.timeout_s) for i in range(args.games)])


if __name__ == "__main__":
    sys.exit(main())
