"""Reward components over arrays and their weighted sum.

A component is a function ``RewardContext -> [K, C] float32`` (one value per car of every arena).
Components read the state from each car's own side of the field (orange's view is mirrored), so
"the opponent goal" is always at +y.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from speedflip._types import Array
from speedflip.env import layout as L
from speedflip.registry import REWARD_NAMES

if TYPE_CHECKING:  # only for annotations: the config imports this module and must not load RocketSim
    from speedflip.env.arenas import GameArrays

OPPONENT_GOAL = np.array([0.0, L.BACK_WALL_Y + L.BALL_RADIUS, L.GOAL_CENTER_Z], np.float32)


@dataclass
class RewardContext:
    """What reward components may look at after a step."""

    state: GameArrays
    car_teams: Array  # [C]
    touched: Array  # [K, C] bool: the car touched the ball during this step
    goal_team: Array  # [K] int: -1 no goal, 0 blue scored, 1 orange scored
    prev_state: GameArrays | None = None  # the state before the step (None: treated as unchanged)
    last_touch: Array | None = None  # [K, C] bool: the car made the ball's latest touch (None: this step's touches)

    @property
    def before(self) -> GameArrays:
        return self.prev_state if self.prev_state is not None else self.state

    def own_view_before(self) -> tuple[Array, Array]:
        """Like :meth:`own_view`, for the state before the step."""
        C = self.car_teams.shape[0]
        return self.before.cars[:, np.arange(C), self.car_teams], self.before.ball[:, self.car_teams]

    def counter_delta(self, column: int) -> Array:
        """``[K, C]`` increase of one of RocketSim's per-car counters (goals, shots, saves, demos, pickups)."""
        now = self.state.cars[:, :, 0, column]
        delta: Array = np.maximum(now - self.before.cars[:, :, 0, column], 0.0)
        return delta

    def own_view(self) -> tuple[Array, Array]:
        """``(cars [K, C, 36], ball [K, C, 25])``, each car and the ball seen from the car's own side."""
        C = self.car_teams.shape[0]
        cars = self.state.cars[:, np.arange(C), self.car_teams]
        ball = self.state.ball[:, self.car_teams]
        return cars, ball


RewardFn = Callable[[RewardContext], Array]


def _unit(v: Array) -> Array:
    out: Array = v / np.maximum(np.linalg.norm(v, axis=-1, keepdims=True), 1e-6)
    return out


def goal(ctx: RewardContext) -> Array:
    """+1 to every car of the team that scored, -1 to every car of the team that conceded."""
    scored = ctx.goal_team[:, None] == ctx.car_teams[None, :]
    conceded = (ctx.goal_team[:, None] >= 0) & ~scored
    return np.asarray(scored, np.float32) - np.asarray(conceded, np.float32)


def touch(ctx: RewardContext) -> Array:
    """1 for a car that touched the ball during the step."""
    return np.asarray(ctx.touched, np.float32)


def velocity_player_to_ball(ctx: RewardContext) -> Array:
    """Car speed towards the ball, as a fraction of the car's top speed (-1..1)."""
    cars, ball = ctx.own_view()
    direction = _unit(ball[..., L.BALL_POS] - cars[..., L.CAR_POS])
    return np.asarray(np.sum(cars[..., L.CAR_VEL] * direction, axis=-1) / L.CAR_MAX_SPEED, np.float32)


def velocity_ball_to_goal(ctx: RewardContext) -> Array:
    """Ball speed towards the opponent goal, as a fraction of the ball's top speed (-1..1)."""
    _, ball = ctx.own_view()
    direction = _unit(OPPONENT_GOAL - ball[..., L.BALL_POS])
    return np.asarray(np.sum(ball[..., L.BALL_VEL] * direction, axis=-1) / L.BALL_MAX_SPEED, np.float32)


def face_ball(ctx: RewardContext) -> Array:
    """Cosine between the car's forward direction and the direction to the ball (-1..1)."""
    cars, ball = ctx.own_view()
    direction = _unit(ball[..., L.BALL_POS] - cars[..., L.CAR_POS])
    return np.asarray(np.sum(cars[..., L.CAR_FORWARD] * direction, axis=-1), np.float32)


OWN_GOAL = np.array([0.0, -L.BACK_WALL_Y - L.BALL_RADIUS, L.GOAL_CENTER_Z], np.float32)
GOAL_DISTANCE_SCALE = 3000.0  # uu: distances are scored with exp(-d / scale)
TURTLE_UP_Z = -0.7  # up vector z below this on or near the ground: the car lies on its roof


def _f32(x: Array) -> Array:
    return np.asarray(x, np.float32)


def goal_scored(ctx: RewardContext) -> Array:
    """1 to every car of the team that scored (the event only; see ``goal`` for the signed version)."""
    return _f32(ctx.goal_team[:, None] == ctx.car_teams[None, :])


def goal_conceded(ctx: RewardContext) -> Array:
    """1 to every car of the team that conceded (use a negative weight)."""
    return _f32((ctx.goal_team[:, None] >= 0) & (ctx.goal_team[:, None] != ctx.car_teams[None, :]))


def shot(ctx: RewardContext) -> Array:
    """1 when RocketSim counts a shot on goal for the car (its shot counter went up)."""
    return _f32(ctx.counter_delta(L.CAR_SHOTS) > 0)


def save(ctx: RewardContext) -> Array:
    """1 when RocketSim counts a save for the car."""
    return _f32(ctx.counter_delta(L.CAR_SAVES) > 0)


def demo(ctx: RewardContext) -> Array:
    """1 when the car demolished an opponent."""
    return _f32(ctx.counter_delta(L.CAR_DEMOS) > 0)


def demoed(ctx: RewardContext) -> Array:
    """1 on the step the car got demolished (use a negative weight)."""
    now = ctx.state.cars[:, :, 0, L.CAR_IS_DEMOED] > 0.5
    before = ctx.before.cars[:, :, 0, L.CAR_IS_DEMOED] > 0.5
    return _f32(now & ~before)


def strong_hit(ctx: RewardContext) -> Array:
    """On a touch: the change of ball velocity, as a fraction of the ball's top speed (0..1)."""
    dv = ctx.state.ball[:, 0, L.BALL_VEL] - ctx.before.ball[:, 0, L.BALL_VEL]
    strength = np.minimum(np.linalg.norm(dv, axis=-1) / L.BALL_MAX_SPEED, 1.0)
    return _f32(ctx.touched * strength[:, None])


def jump_shot(ctx: RewardContext) -> Array:
    """1 for a touch while the car is in the air."""
    cars, _ = ctx.own_view()
    return _f32(ctx.touched & (cars[..., L.CAR_ON_GROUND] < 0.5))


def basic_shot(ctx: RewardContext) -> Array:
    """On a touch: the ball's speed towards the opponent goal after it (0..1 of top speed)."""
    return _f32(ctx.touched * np.maximum(velocity_ball_to_goal(ctx), 0.0))


def aimed_touch(ctx: RewardContext) -> Array:
    """On a touch: ``(1 + cos a) / 2``, ``a`` the angle between the ball's velocity after the step and the
    direction from the ball to the opponent goal: 1 sent straight at it, 0.5 across, 0 straight at the own
    goal (0.5 for a ball left at rest). A touch reward that never pays for an own goal's direction."""
    _, ball = ctx.own_view()
    velocity = ball[..., L.BALL_VEL]
    speed = np.linalg.norm(velocity, axis=-1)
    cosine = np.sum(velocity * _unit(OPPONENT_GOAL - ball[..., L.BALL_POS]), axis=-1) / np.maximum(speed, 1e-6)
    aim = np.where(speed > 1.0, (1.0 + np.clip(cosine, -1.0, 1.0)) / 2.0, 0.5)
    return _f32(ctx.touched * aim)


def aimed_hit(ctx: RewardContext) -> Array:
    """On a touch: ``aimed_touch`` times ``strong_hit``, the aim ``(1 + cos a) / 2`` times the change of the
    ball's velocity as a fraction of its top speed. A shot at the goal pays, a soft push beside it almost
    nothing: a touch reward that cannot be farmed by dribbling the ball along (0..1)."""
    return _f32(aimed_touch(ctx) * strong_hit(ctx))


GOAL_MOUTH_HALF_WIDTH = L.GOAL_POST_X - L.BALL_RADIUS  # uu: |x| of the ball's centre that passes inside the posts


def goal_line_x(pos: Array, vel: Array) -> Array:
    """Where a ball at ``pos`` moving at ``vel`` (``[..., 3]``, its own team's view: the opponent goal at +y) would
    cross the opponent goal line ``y = 5120`` going on in a straight horizontal line: its ``x`` there, ``nan`` when
    it does not move towards that line. (Walls, bounces and height are ignored.)"""
    towards = vel[..., 1] > 1.0
    seconds = (L.BACK_WALL_Y - pos[..., 1]) / np.where(towards, vel[..., 1], 1.0)
    x: Array = np.where(towards & (seconds >= 0.0), pos[..., 0] + vel[..., 0] * seconds, np.nan)
    return x


def on_target_touch(ctx: RewardContext) -> Array:
    """On a touch: 1 when the ball leaves it on target, else 0. On target: the ball moves towards the opponent
    goal and its horizontal velocity, continued in a straight line from where the ball is, crosses the goal line
    (``y = 5120``) with the ball's centre at ``|x| <= 892.755 - 91.25`` (inside the posts; :func:`goal_line_x`).

    ``aimed_touch`` pays a shot that misses the post by a car's width 0.98 of one straight at the goal's centre;
    this pays it 0 (docs/learning.md, thirty-ninth session: the exported bots' draws against an idle car are
    such near misses). Walls, bounces and the ball's height are ignored: a ball over the crossbar is on target."""
    _, ball = ctx.own_view()
    with np.errstate(invalid="ignore"):
        on_target = np.abs(goal_line_x(ball[..., L.BALL_POS], ball[..., L.BALL_VEL])) <= GOAL_MOUTH_HALF_WIDTH
    return _f32(ctx.touched & on_target)


FLIP_Y = np.array([1.0, -1.0, 1.0], np.float32)  # x, y, z -> x, -y, z: the own goal line onto the opponent's


def heads_into_own_goal(ball: Array) -> Array:
    """``[...]`` bool: the ball (``[..., 25]``, its own team's view) moves towards the own goal line ``y = -5120`` on a
    horizontal straight line that crosses it inside the posts (:func:`goal_line_x` of the ball seen with ``y``
    flipped; walls, bounces and height ignored)."""
    with np.errstate(invalid="ignore"):
        crossing = goal_line_x(ball[..., L.BALL_POS] * FLIP_Y, ball[..., L.BALL_VEL] * FLIP_Y)
        heads_in: Array = np.abs(crossing) <= GOAL_MOUTH_HALF_WIDTH
    return heads_in


def own_goal_touch(ctx: RewardContext) -> Array:
    """On a touch: 1 when the ball heads between the car's *own* posts after the step and did not before it, else 0
    (use a negative weight): the touch that turns the ball into the own goal (:func:`heads_into_own_goal`, which is
    :func:`on_target_touch`'s line mirrored onto the own goal line) costs on the step it is made, not only when, and
    if, the goal follows. A touch on a ball that was already heading in (a save that fails) and a clearance across
    the field cost nothing."""
    _, ball = ctx.own_view()
    _, ball_before = ctx.own_view_before()
    return _f32(ctx.touched & heads_into_own_goal(ball) & ~heads_into_own_goal(ball_before))


def own_goal(ctx: RewardContext) -> Array:
    """1 to the car whose touch was the ball's last when its own team conceded (use a negative weight): the own goal
    as ``speedflip eval`` counts it, paid on the goal's step to the car that made it, on top of what ``goal`` charges
    every car of the conceding team. The last touch is ``ctx.last_touch`` (kept by the environment across steps);
    a last touch that a car of the scoring team shared (both sides touched in the same step) counts for neither."""
    last = ctx.touched if ctx.last_touch is None else ctx.last_touch
    scored = ctx.goal_team[:, None] >= 0  # [K, 1]
    conceding = scored & (ctx.car_teams[None, :] != ctx.goal_team[:, None])  # [K, C]
    scorer_touched = (last & scored & ~conceding).any(axis=1, keepdims=True)  # [K, 1]
    return _f32(last & conceding & ~scorer_touched)


def ball_velocity_to_own_goal(ctx: RewardContext) -> Array:
    """Ball speed towards the car's own goal, 0..1 of top speed (use a negative weight)."""
    _, ball = ctx.own_view()
    direction = _unit(OWN_GOAL - ball[..., L.BALL_POS])
    speed = np.sum(ball[..., L.BALL_VEL] * direction, axis=-1) / L.BALL_MAX_SPEED
    return _f32(np.maximum(speed, 0.0))


def ball_goal_distance(ctx: RewardContext) -> Array:
    """``exp(-d(ball, opponent goal)/3000) - exp(-d(ball, own goal)/3000)`` (-1..1): where the ball is."""
    _, ball = ctx.own_view()
    pos = ball[..., L.BALL_POS]
    to_opp = np.linalg.norm(OPPONENT_GOAL - pos, axis=-1)
    to_own = np.linalg.norm(OWN_GOAL - pos, axis=-1)
    return _f32(np.exp(-to_opp / GOAL_DISTANCE_SCALE) - np.exp(-to_own / GOAL_DISTANCE_SCALE))


GOAL_MOUTH_SCALE = 1500.0  # uu: goal_mouth_progress's potential is exp(-d / scale), d the distance to a goal mouth
SHAPING_GAMMA = 0.99  # the discount of goal_mouth_progress's potential-based form: the presets' ppo.gamma


def goal_mouth_distance(pos: Array, goal_y: float) -> Array:
    """Distance (uu) from ball centres ``pos`` (``[..., 3]``) to the mouth of the goal whose line is ``y = goal_y``:
    the rectangle of ball-centre positions that pass inside the posts and under the crossbar (``|x| <= 801.505``,
    ``91.25 <= z <= 551.525``) on that line. 0 on the mouth, the distance to the line for a ball behind it."""
    nearest_x = np.clip(pos[..., 0], -GOAL_MOUTH_HALF_WIDTH, GOAL_MOUTH_HALF_WIDTH)
    nearest_z = np.clip(pos[..., 2], L.BALL_RADIUS, L.GOAL_HEIGHT - L.BALL_RADIUS)
    offset = np.stack([pos[..., 0] - nearest_x, pos[..., 1] - goal_y, pos[..., 2] - nearest_z], axis=-1)
    distance: Array = np.linalg.norm(offset, axis=-1)
    return distance


def goal_mouth_potential(pos: Array) -> Array:
    """``exp(-d_opponent / 1500) - exp(-d_own / 1500)`` (-1..1), ``d`` the distances to the two goal mouths
    (:func:`goal_mouth_distance`; the opponent goal at +y): 1 on the opponent's goal mouth, 0 at midfield."""
    to_opponent = goal_mouth_distance(pos, L.BACK_WALL_Y)
    to_own = goal_mouth_distance(pos, -L.BACK_WALL_Y)
    return _f32(np.exp(-to_opponent / GOAL_MOUTH_SCALE) - np.exp(-to_own / GOAL_MOUTH_SCALE))


def goal_mouth_progress(ctx: RewardContext) -> Array:
    """The ball's progress towards the opponent goal mouth, as potential-based shaping (Ng et al. 1999):
    ``0.99 * phi(ball after the step) - phi(ball before)``, ``phi`` = :func:`goal_mouth_potential`, and
    ``phi = 0`` after a goal (the episode's terminal state).

    ``ball_goal_distance`` pays where the ball *is*, every step, so a ball held beside the post earns nearly what
    one in the goal mouth does (docs/learning.md, fifty-second session: such bots pinned the ball beside the posts
    and drew). This pays only for moving it: its discounted sum over an episode is ``-phi(start)`` whatever happens
    in between (no loop farms it, and with the discount 0.99 = the presets' ``ppo.gamma`` the best policy is the
    same as without it); what it changes is how soon a step that moves the ball towards the goal mouth is paid,
    not only when the goal follows. Because ``phi`` measures the distance to the goal *mouth* (not its centre) with
    a 1500-uu scale, most of it is paid in the last two thousand uu (``exp(-d / 1500)``: 0.82 for a ball 300 uu
    beside the post, 0.26 at 2,000 uu, 0.04 at 5,000) and a ball held still near the opponent goal costs
    ``0.01 phi`` a step."""
    _, ball = ctx.own_view()
    _, ball_before = ctx.own_view_before()
    now = np.where(ctx.goal_team[:, None] >= 0, 0.0, goal_mouth_potential(ball[..., L.BALL_POS]))
    before = goal_mouth_potential(ball_before[..., L.BALL_POS])
    return _f32(SHAPING_GAMMA * now - before)


def align_ball_goal(ctx: RewardContext) -> Array:
    """Goal-side and lined up (-1..1): the mean of ``cos(car->ball, own goal->car)`` and
    ``cos(car->ball, car->opponent goal)``.

    The first is 1 when the car is between its own goal and the ball, the second when the ball lies on
    the way from the car to the opponent goal; both are -1 for a car upfield of a ball near its own
    goal, the position from which bots push the ball into their own net (docs/learning.md, seventeenth
    session). RLGym's ``AlignBallGoal`` (defense = offense = 1) is the sum, twice this."""
    cars, ball = ctx.own_view()
    car_pos = cars[..., L.CAR_POS]
    to_ball = _unit(ball[..., L.BALL_POS] - car_pos)
    defense = np.sum(to_ball * _unit(car_pos - OWN_GOAL), axis=-1)
    offense = np.sum(to_ball * _unit(OPPONENT_GOAL - car_pos), axis=-1)
    return _f32((defense + offense) / 2.0)


def in_air(ctx: RewardContext) -> Array:
    """1 while the car is airborne (not on its wheels and not demolished)."""
    cars, _ = ctx.own_view()
    return _f32((cars[..., L.CAR_ON_GROUND] < 0.5) & (cars[..., L.CAR_IS_DEMOED] < 0.5))


def save_boost(ctx: RewardContext) -> Array:
    """``sqrt(boost / 100)``: keeping boost is worth something, the first units the most."""
    cars, _ = ctx.own_view()
    return _f32(np.sqrt(np.clip(cars[..., L.CAR_BOOST], 0.0, 100.0) / 100.0))


def collect_boost(ctx: RewardContext) -> Array:
    """Boost gained during the step / 100 (pads picked up)."""
    now = ctx.state.cars[:, :, 0, L.CAR_BOOST]
    before = ctx.before.cars[:, :, 0, L.CAR_BOOST]
    return _f32(np.maximum(now - before, 0.0) / 100.0)


def turtled(ctx: RewardContext) -> Array:
    """1 while the car lies on its roof near the ground (use a negative weight: anti-turtle)."""
    cars, _ = ctx.own_view()
    return _f32((cars[..., L.CAR_UP][..., 2] < TURTLE_UP_Z) & (cars[..., L.CAR_POS][..., 2] < 300.0))


def recovery(ctx: RewardContext) -> Array:
    """On the step a car lands on its wheels after being airborne or turtled: ``1 - |v_z| / 2300``
    before landing (a smooth, upright landing scores most)."""
    cars, _ = ctx.own_view()
    before, _ = ctx.own_view_before()
    landed = (cars[..., L.CAR_ON_GROUND] > 0.5) & (before[..., L.CAR_ON_GROUND] < 0.5)
    upright = cars[..., L.CAR_UP][..., 2] > 0.7
    smooth = 1.0 - np.minimum(np.abs(before[..., L.CAR_VEL][..., 2]) / L.CAR_MAX_SPEED, 1.0)
    return _f32(landed & upright) * _f32(smooth)


REWARD_COMPONENTS: dict[str, RewardFn] = {
    "goal": goal,
    "goal_scored": goal_scored,
    "goal_conceded": goal_conceded,
    "touch": touch,
    "shot": shot,
    "save": save,
    "demo": demo,
    "demoed": demoed,
    "strong_hit": strong_hit,
    "jump_shot": jump_shot,
    "basic_shot": basic_shot,
    "aimed_touch": aimed_touch,
    "aimed_hit": aimed_hit,
    "on_target_touch": on_target_touch,
    "own_goal_touch": own_goal_touch,
    "own_goal": own_goal,
    "velocity_player_to_ball": velocity_player_to_ball,
    "velocity_ball_to_goal": velocity_ball_to_goal,
    "ball_velocity_to_own_goal": ball_velocity_to_own_goal,
    "ball_goal_distance": ball_goal_distance,
    "goal_mouth_progress": goal_mouth_progress,
    "align_ball_goal": align_ball_goal,
    "face_ball": face_ball,
    "in_air": in_air,
    "save_boost": save_boost,
    "collect_boost": collect_boost,
    "turtled": turtled,
    "recovery": recovery,
}

if tuple(REWARD_COMPONENTS) != REWARD_NAMES:  # the config validates names against speedflip.registry
    raise RuntimeError(f"reward components {list(REWARD_COMPONENTS)} differ from speedflip.registry.REWARD_NAMES")

# event components count for the "sparse" reward mode; everything else is "dense" shaping
SPARSE_COMPONENTS = frozenset({"goal", "goal_scored", "goal_conceded", "touch", "shot", "save", "demo", "demoed"})


def mode_weights(weights: Mapping[str, float], mode: str, sparse_scale: float, dense_scale: float) -> dict[str, float]:
    """Apply a reward mode: ``sparse`` keeps only event components, ``dense`` only shaping ones,
    ``hybrid`` keeps both, events scaled by ``sparse_scale`` and shaping by ``dense_scale``."""
    if mode not in ("sparse", "dense", "hybrid"):
        raise ValueError(f"unknown reward mode '{mode}'; choose sparse, dense or hybrid")
    out = {}
    for name, weight in weights.items():
        sparse = name in SPARSE_COMPONENTS
        if (mode == "sparse" and not sparse) or (mode == "dense" and sparse):
            continue
        out[name] = weight * (sparse_scale if sparse else dense_scale)
    return out


def distribute(rewards: Array, car_teams: Array, team_spirit: float, opponent_scale: float) -> Array:
    """Team spirit and zero-sum: ``r_i <- (1 - tau) r_i + tau * mean(team) - opponent_scale * mean(opponents)``.

    ``tau = 0`` and ``opponent_scale = 0`` leave rewards unchanged; ``tau = 1`` shares them fully
    within a team; ``opponent_scale = 1`` makes the game zero-sum between the teams.
    """
    if team_spirit == 0.0 and opponent_scale == 0.0:
        return rewards
    team_means = {}
    for team in (0, 1):
        members = car_teams == team
        team_means[team] = rewards[:, members].mean(axis=1) if members.any() else np.zeros(rewards.shape[0], np.float32)
    out = np.empty_like(rewards)
    for c, team in enumerate(car_teams.tolist()):
        out[:, c] = (
            (1.0 - team_spirit) * rewards[:, c] + team_spirit * team_means[team] - opponent_scale * team_means[1 - team]
        )
    return out


class WeightedReward:
    """The weighted sum of named components, then team-spirit / zero-sum distribution.

    Remembers each component's mean (over all cars, before distribution) for logging as ``rewards/<name>``, and
    the last step's weighted sum before distribution as ``last_shaped`` ([K, C]): what each car earned itself, the
    figure an episode's return counts (with ``opponent_scale`` 1 the distributed rewards of a 1v1 arena sum to 0).
    """

    def __init__(self, weights: Mapping[str, float], team_spirit: float = 0.0, opponent_scale: float = 0.0) -> None:
        self.team_spirit = team_spirit
        self.opponent_scale = opponent_scale
        self.weights: dict[str, float] = {}
        self.last_means: dict[str, float] = {}
        self.last_shaped: Array = np.zeros((0, 0), np.float32)
        self.set_weights(weights)

    def set_weights(self, weights: Mapping[str, float]) -> None:
        """Switch the weights (reward phases do this between iterations)."""
        unknown = sorted(set(weights) - set(REWARD_COMPONENTS))
        if unknown:
            raise ValueError(f"unknown reward component(s) {unknown}; available: {sorted(REWARD_COMPONENTS)}")
        self.weights = {name: float(w) for name, w in weights.items() if w != 0.0}
        self.last_means = {}

    def __call__(self, ctx: RewardContext) -> Array:
        K, C = ctx.touched.shape
        total = np.zeros((K, C), np.float32)
        for name, weight in self.weights.items():
            value = REWARD_COMPONENTS[name](ctx)
            self.last_means[name] = float(value.mean())
            total += weight * value
        self.last_shaped = total.copy()
        return distribute(total, ctx.car_teams, self.team_spirit, self.opponent_scale)
