"""Periodic evaluation during training: the learner's current network against the rule bot, rated."""

from __future__ import annotations

from pathlib import Path

from speedflip.algos.normalize import RunningMeanStd
from speedflip.config import Config
from speedflip.env.vec_env import RocketLeagueVecEnv
from speedflip.models.build import PolicyModel
from speedflip.selfplay.league import REFERENCE_PLAYER, append_games
from speedflip.selfplay.match import OBS_KEYS, match_env_config, play_match, summarize
from speedflip.selfplay.matchmaker import LEARNER, LivePolicy, Matchmaker
from speedflip.selfplay.policies import ScriptedPolicy
from speedflip.selfplay.rule_policy import RulePolicy


def evaluate_vs_rule(
    env_cfg: Config,
    model: PolicyModel,
    obs_rms: RunningMeanStd | None,
    obs_dim: int,
    matchmaker: Matchmaker,
    global_step: int,
    seed: int,
    run_dir: Path | None,
) -> dict[str, float | None]:
    """Play ``selfplay.eval_games`` games against the rule bot in separate arenas; rate them in the
    matchmaker's league and log them to ``games.csv``. Empty when the action form or obs do not fit."""
    sp = env_cfg.selfplay
    env = env_cfg.env
    if env.action_form != "table":
        return {}  # the match players pick table rows; other action forms are rated with their own bots
    team = max(1, env.blue_size)
    pad = max(env.obs_team_size, env.blue_size, env.orange_size)
    options = {**env.model_dump(include=set(OBS_KEYS)), "obs_team_size": pad}
    match_cfg = match_env_config(sp.eval_games, team, sp.eval_game_seconds, obs_options=options)
    match = RocketLeagueVecEnv(match_cfg, seed=seed)
    try:
        if match.obs_dim != obs_dim:
            return {}
        live = LivePolicy(model, obs_rms, seed)
        rule = ScriptedPolicy(RulePolicy.for_table(match.actions.table))
        results = play_match(match, live, rule, sp.eval_game_seconds)
    finally:
        match.close()
    summary = summarize(results)
    league = matchmaker.league
    rows = []
    matchmaker.flush()  # pool games played before these go first in games.csv
    for r in results:
        rating_a, rating_b = league.record(LEARNER, REFERENCE_PLAYER, r.score_a)
        rows.append({**r.as_dict(), "step": global_step, "player_a": LEARNER, "player_b": REFERENCE_PLAYER,
                     "team_size": team, "rating_a": rating_a, "rating_b": rating_b})  # fmt: skip
    if run_dir is not None:
        league.save()
        append_games(run_dir / "games.csv", rows)
    return {
        "selfplay/winrate_vs_rule": summary.wins / summary.games,
        "selfplay/score_rate_vs_rule": summary.score_rate,
        "selfplay/goals_for_vs_rule": summary.goals_a / summary.games,
        "selfplay/goals_against_vs_rule": summary.goals_b / summary.games,
    }
