"""Training against the opponent pool: which rows the learner drives, who the opponents are.

The first ``round(opponent_share * K)`` arenas are *pool arenas*: the learner drives one team
(blue in even arenas, orange in odd ones) and a pool member drives the other; the remaining arenas
are pure self-play (the learner drives every car). Opponents are sampled per arena at every
episode start. Every finished pool-arena episode is a rated game (a goal wins it; a time limit is a
draw) logged to ``games.csv`` and folded into ``league.json``.

Opponents act in the learner's lookup table (``table``): collection steps the env with one index per
agent, so a milestone trained with another ``env.action_table`` is not put in the pool (a note says
so), and the rule bot is left out if the table lacks the rows its rules use.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import torch

from speedflip._types import Array
from speedflip.algos.normalize import RunningMeanStd
from speedflip.checkpoint import CheckpointError, list_checkpoints, verify_checkpoint
from speedflip.config import SelfPlayConfig
from speedflip.env import layout as L
from speedflip.env.action_forms import same_table, table_from_run_config
from speedflip.env.actions import ActionError
from speedflip.env.arenas import GameArrays
from speedflip.models.build import ActingMemory, PolicyModel
from speedflip.selfplay.league import IDLE_PLAYER, REFERENCE_PLAYER, League, append_games
from speedflip.selfplay.policies import NeuralPolicy, Policy, ScriptedPolicy, idle_policy
from speedflip.selfplay.pool import Member, prune, sampling_weights, with_fixed_shares
from speedflip.selfplay.rule_policy import RulePolicy
from speedflip.selfplay.stacked import StackedPolicies, can_stack

LEARNER = "learner"
_NO_STATE = GameArrays.empty(0, 0)  # neural opponents ignore the state argument


class LivePolicy:
    """The learner's current network as a match player (for periodic evaluation).

    ``table``: the lookup table the network was trained with; ``None`` (default) means the match env's
    table, which is right when the env was built from the run's config (:func:`match_env_config` with
    the run's ``action_table``).
    """

    def __init__(
        self,
        model: PolicyModel,
        obs_rms: RunningMeanStd | None,
        seed: int,
        name: str = LEARNER,
        table: Array | None = None,
    ) -> None:
        self.model = model
        self.table = table
        self.memory = ActingMemory(model)
        self.obs_rms = obs_rms
        self.name = name
        self.generator = torch.Generator().manual_seed(seed)

    @torch.no_grad()
    def act(self, obs: Array, state: GameArrays, car_teams: Array) -> Array:
        x = self.obs_rms.normalize(obs) if self.obs_rms is not None else obs
        device = next(self.model.parameters()).device
        probs = torch.softmax(self.memory.logits(torch.as_tensor(x, device=device)), -1).cpu()
        out: Array = torch.multinomial(probs, 1, generator=self.generator).squeeze(-1).numpy()
        return out

    def reset(self, rows: Array) -> None:
        self.memory.reset(rows)


class Matchmaker:
    """Pool arenas, opponent sampling, ratings of training games."""

    def __init__(
        self,
        cfg: SelfPlayConfig,
        opponent_share: float,
        num_arenas: int,
        car_teams: Array,
        table: Array,
        obs_dim: int,
        run_dir: Path | None,
        seed: int,
        step_seconds: float | None = None,
    ) -> None:
        self.cfg = cfg
        # game seconds per env step (tick_skip / 120): the length of every rated game is logged to
        # games.csv ("seconds"); None leaves that column empty
        self.step_seconds = step_seconds
        self.num_arenas = num_arenas
        self.car_teams = car_teams
        self.num_cars = car_teams.shape[0]
        self.table = table
        self.obs_dim = obs_dim
        self.run_dir = run_dir
        self.rng = np.random.default_rng([seed, 7919])
        self.pool_arenas = round(opponent_share * num_arenas)
        self.game_steps = np.zeros(self.pool_arenas, np.int64)  # env steps since each pool game began
        learner_team = np.arange(num_arenas) % 2  # pool arenas: learner blue in even, orange in odd arenas
        is_pool = np.arange(num_arenas) < self.pool_arenas
        learner = ~is_pool[:, None] | (car_teams[None, :] == learner_team[:, None])
        self.learner_rows = learner.reshape(-1)
        self.learner_cols = np.flatnonzero(self.learner_rows)
        self.learner_team = learner_team
        self.league = League.load(run_dir / "league.json") if run_dir is not None else League(Path("league.json"))
        self.league.k_factor = cfg.k_factor
        self.league.player(LEARNER)
        self.members: list[Member] = []
        self._policies: dict[str, Policy] = {}
        self.notes: list[str] = []
        if cfg.include_rule:
            try:
                rules = RulePolicy(table)
            except ValueError as err:
                self.notes.append(f"the rule bot cannot play this action table ({err}); it is left out of the pool")
            else:
                self.members.append(Member(REFERENCE_PLAYER, None, 0, self.league.player(REFERENCE_PLAYER).rating))
                self._policies[REFERENCE_PLAYER] = ScriptedPolicy(rules)
        if cfg.idle_share > 0:
            try:
                self._policies[IDLE_PLAYER] = idle_policy(table)
            except ValueError as err:
                self.notes.append(f"the idle car cannot play this action table ({err}); it is left out of the pool")
            else:
                self.members.append(Member(IDLE_PLAYER, None, 0, self.league.player(IDLE_PLAYER).rating))
        self.opponent = np.full(num_arenas, -1, np.int64)  # index into self.members per pool arena
        # the noisy rule bot (selfplay.rule_noise): per car row, env steps left of its random excursion and its row
        self.noise_steps_left = np.zeros(num_arenas * self.num_cars, np.int64)
        self.noise_row = np.zeros(num_arenas * self.num_cars, np.int64)
        self.recent: list[float] = []  # learner scores of recent pool games
        self._pending_games: list[dict[str, Any]] = []
        self._stack_key: tuple[str, ...] | None = None
        self._stack: tuple[StackedPolicies, dict[int, int]] | None = None

    # ------------------------------------------------------------------ pool
    @property
    def learner_elo(self) -> float:
        return self.league.player(LEARNER).rating

    def load_milestones(self, milestones_dir: Path) -> None:
        """Put every verified milestone of the run into the pool (called at start and on resume)."""
        if not milestones_dir.is_dir():
            return
        for phase in sorted(p for p in milestones_dir.iterdir() if p.is_dir()):
            for path in sorted(list_checkpoints(phase), key=lambda p: int(p.name)):
                self.add_snapshot(path)

    def add_snapshot(self, path: Path) -> None:
        try:
            meta = verify_checkpoint(path)
        except CheckpointError as err:
            self.notes.append(f"milestone skipped: {err}")
            return
        if meta.get("compat", {}).get("obs_dim") != self.obs_dim:
            self.notes.append(f"milestone {path} has another observation size; not used as an opponent")
            return
        try:
            table = table_from_run_config(meta.get("config"))
        except ActionError as err:
            self.notes.append(f"milestone {path}: its action table cannot be built ({err}); not used as an opponent")
            return
        if not same_table(table, self.table) or meta.get("compat", {}).get("num_actions") != self.table.shape[0]:
            self.notes.append(
                f"milestone {path} was trained with another action table ({table.shape[0]} rows, the learner's has "
                f"{self.table.shape[0]}); not used as an opponent"
            )
            return
        step = int(meta["global_step"])
        name = f"{path.parent.name}@{step}"
        if any(m.name == name for m in self.members):
            return
        rating = self.league.player(name, step=step, path=str(path))
        if rating.games == 0:
            rating.rating = self.learner_elo  # a new snapshot starts at the learner's rating
        self.members.append(Member(name, str(path), step, rating.rating, rating.games))
        self.members = prune(self.members, self.learner_elo, self.cfg.min_elo_diff, self.cfg.pool_size)
        kept = {m.name for m in self.members}
        self._policies = {name: p for name, p in self._policies.items() if name in kept}

    def _policy(self, member: Member) -> Policy:
        if member.name not in self._policies:
            assert member.path is not None
            self._policies[member.name] = NeuralPolicy(
                Path(member.path), self.obs_dim, table=self.table, seed=int(self.rng.integers(2**31))
            )
        return self._policies[member.name]

    def sample(self, arenas: Array) -> None:
        """Draw an opponent for each of ``arenas`` (pool arenas only)."""
        arenas = arenas[arenas < self.pool_arenas]
        if arenas.size == 0:
            return
        if not self.members:
            self.opponent[arenas] = -1
            return
        for m in self.members:
            m.elo = self.league.player(m.name).rating
        probs = sampling_weights(
            self.cfg.sampling,
            [m.elo for m in self.members],
            [m.step for m in self.members],
            self.learner_elo,
            self.cfg.temperature,
            self.cfg.elo_window,
            self.cfg.target_win_rate,
        )
        fixed = {REFERENCE_PLAYER: self.cfg.rule_share, IDLE_PLAYER: self.cfg.idle_share or None}
        probs = with_fixed_shares(probs, [fixed.get(m.name) if m.path is None else None for m in self.members])
        self.opponent[arenas] = self.rng.choice(len(self.members), size=arenas.size, p=probs)

    # ------------------------------------------------------------------ acting
    def fill_opponent_actions(
        self,
        actions: Array,
        obs: Array,
        state: GameArrays | None,
        rule_actions: Array | None = None,
        first_arena: int = 0,
    ) -> Array:
        """Overwrite the rows of pool arenas that belong to opponents with the opponents' choices.

        Feed-forward snapshots of one architecture act together in one batched pass
        (:class:`~speedflip.selfplay.stacked.StackedPolicies`); the rule bot and recurrent snapshots act
        one by one. ``rule_actions`` (``[num_agents]``) are the rule bot's rows on this ``state`` when the
        caller has them already (the kickstart's labels, on the same table): the rule bot is then not
        asked a second time. ``first_arena``: the arrays hold the consecutive arenas from this one on (one
        group of a pipelined collector; 0 and every arena by default).
        """
        C = self.num_cars
        arenas = np.arange(first_arena, first_arena + actions.shape[0] // C)
        arenas = arenas[arenas < self.pool_arenas]
        if arenas.size == 0:
            return actions
        out = actions.copy()
        global_rows = (arenas[:, None] * C + np.arange(C)[None, :]).reshape(-1)
        global_rows = global_rows[~self.learner_rows[global_rows]]  # the opponents' cars of these pool arenas
        member_of_row = self.opponent[global_rows // C]
        rows = global_rows - first_arena * C  # rows of the arrays given
        stacked, slots = self._stacked()
        in_stack = np.isin(member_of_row, list(slots)) if slots else np.zeros(rows.size, bool)
        if stacked is not None and in_stack.any():
            chosen_rows = rows[in_stack]
            out[chosen_rows] = stacked.act(obs[chosen_rows], np.array([slots[i] for i in member_of_row[in_stack]]))
        for index in np.unique(member_of_row[~in_stack]).tolist():
            if index < 0:
                continue  # empty pool: the learner's own choice drives these cars (self-play fallback)
            member = self.members[index]
            is_rule = member.name == REFERENCE_PLAYER and member.path is None
            if state is None and is_rule:
                raise RuntimeError("the rule bot needs the arena state (in-process collector)")
            if is_rule and rule_actions is not None:
                chosen = rule_actions
            else:
                chosen = self._policy(member).act(obs, state if state is not None else _NO_STATE, self.car_teams)
            of_member = member_of_row == index
            picked = chosen[rows[of_member]]
            if is_rule and self.cfg.rule_noise > 0:
                picked = self._with_excursions(global_rows[of_member], picked)
            out[rows[of_member]] = picked
        return out

    def _with_excursions(self, global_rows: Array, chosen: Array) -> Array:
        """The rule bot's rows with random excursions (``selfplay.rule_noise``): a car not on one starts one with
        probability ``p`` per env step and then plays one uniformly random row for ``H`` steps, the step it starts
        included. Off runs last ``(1 - p) / p`` steps on average, so the share of noisy steps is
        ``H p / (H p + 1 - p)``; ``p = noise / (H (1 - noise) + noise)`` makes it ``noise``."""
        noise, hold = self.cfg.rule_noise, self.cfg.rule_noise_hold_steps
        start_probability = noise / (hold * (1.0 - noise) + noise)
        off_excursion = self.noise_steps_left[global_rows] == 0
        start = global_rows[off_excursion & (self.rng.random(global_rows.size) < start_probability)]
        self.noise_row[start] = self.rng.integers(0, self.table.shape[0], start.size)
        self.noise_steps_left[start] = hold
        on_excursion = self.noise_steps_left[global_rows] > 0
        out = chosen.copy()
        out[on_excursion] = self.noise_row[global_rows[on_excursion]]
        self.noise_steps_left[global_rows[on_excursion]] -= 1
        return out

    def _stacked(self) -> tuple[StackedPolicies | None, dict[int, int]]:
        """The pool's snapshots as one :class:`StackedPolicies` and member index -> its slot there
        (``{}`` when they cannot be stacked); rebuilt when the pool changes."""
        neural = [i for i, m in enumerate(self.members) if m.path is not None]
        key = tuple(self.members[i].name for i in neural)
        if self._stack_key != key:
            self._stack_key = key
            policies = [self._policy(self.members[i]) for i in neural]
            feed_forward = [p for p in policies if isinstance(p, NeuralPolicy)]
            if len(feed_forward) == len(policies) and can_stack(feed_forward):
                stacked = StackedPolicies(feed_forward, seed=int(self.rng.integers(2**31)))
                self._stack = (stacked, {index: slot for slot, index in enumerate(neural)})
            else:
                self._stack = None
        return self._stack if self._stack is not None else (None, {})

    def on_step(
        self, terminated: Array, truncated: Array, goal_team: Array | None, global_step: int, first_arena: int = 0
    ) -> None:
        """Rate finished pool games and draw new opponents for those arenas. ``first_arena``: the arrays hold
        the consecutive arenas from this one on (one group of a pipelined collector; 0 and every arena by default)."""
        C = self.num_cars
        first_pool = min(first_arena, self.pool_arenas)
        end_pool = min(first_arena + terminated.shape[0] // C, self.pool_arenas)
        if end_pool == first_pool:
            return
        ended = np.flatnonzero(terminated | truncated) + first_arena * C
        if ended.size:
            for policy in self._policies.values():
                policy.reset(ended)
            self.noise_steps_left[ended] = 0  # a new game starts without an excursion
        self.game_steps[first_pool:end_pool] += 1
        done = (terminated | truncated).reshape(-1, C)[: end_pool - first_arena, 0]
        if not done.any():
            return
        finished = np.flatnonzero(done) + first_arena
        for k in finished.tolist():
            index = int(self.opponent[k])
            if index < 0:
                continue
            member = self.members[index]
            goal = -1 if goal_team is None else int(goal_team[k - first_arena])
            score = 0.5 if goal < 0 else 1.0 if goal == self.learner_team[k] else 0.0
            rating_learner, rating_member = self.league.record(LEARNER, member.name, score)
            self.recent = [*self.recent[-199:], score]
            goals_l = int(score == 1.0)
            goals_o = int(score == 0.0)
            seconds = None if self.step_seconds is None else round(float(self.game_steps[k] * self.step_seconds), 4)
            self._pending_games.append(
                {
                    "step": global_step, "player_a": LEARNER, "player_b": member.name,
                    "team_size": int((self.car_teams == L.BLUE).sum()), "goals_a": goals_l, "goals_b": goals_o,
                    "score_a": score, "a_is_blue": bool(self.learner_team[k] == L.BLUE),
                    "seconds": seconds,
                    "rating_a": rating_learner, "rating_b": rating_member,
                }
            )  # fmt: skip
        self.game_steps[finished] = 0
        self.sample(finished)

    def take_pending_games(self) -> list[dict[str, Any]]:
        """The games finished since the last flush, handed over and forgotten here (a remote collector
        sends them to the learner, which rates and logs them once)."""
        games, self._pending_games = self._pending_games, []
        return games

    def flush(self) -> None:
        """Write the ratings and the games played since the last flush."""
        if self.run_dir is None:
            return
        self.league.save()
        if self._pending_games:
            append_games(self.run_dir / "games.csv", self._pending_games)
            self._pending_games = []

    def metrics(self) -> dict[str, float | None]:
        win_rate = float(np.mean([s == 1.0 for s in self.recent])) if self.recent else None
        return {
            "selfplay/learner_elo": self.learner_elo,
            "selfplay/pool_size": float(len(self.members)),
            "selfplay/winrate_vs_pool": win_rate,
            "selfplay/score_rate_vs_pool": float(np.mean(self.recent)) if self.recent else None,
        }

    def recent_win_rate(self) -> float | None:
        return float(np.mean([s == 1.0 for s in self.recent])) if len(self.recent) >= 20 else None
