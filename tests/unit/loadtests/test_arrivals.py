import itertools
import statistics

from loadtests import arrivals


def plan(**kw) -> arrivals.ArrivalPlan:
    base = {
        "t0": 0.0,
        "rate": 100.0,
        "arrival": "poisson",
        "burstiness": 1.0,
        "seed": 3,
        "langs": ("en", "zh"),
        "weights": (3.0, 1.0),
        "duration": 200.0,
    }
    return arrivals.ArrivalPlan(**{**base, **kw})


def test_workers_split_one_global_schedule():
    whole = list(arrivals.schedule(plan()))
    shares = [list(arrivals.schedule(plan(worker=i, workers=3))) for i in range(3)]
    assert sorted(x for s in shares for x in s) == whole
    assert abs(len(whole) / 200.0 - 100.0) < 3.0  # the master's rate, over all workers
    assert 0.72 < sum(1 for _, _, lang in whole if lang == "en") / len(whole) < 0.78


def test_gamma_burstiness_changes_dispersion_not_rate():
    def cv(b: float) -> tuple[float, float]:
        times = [t for _, t, _ in arrivals.schedule(plan(arrival="gamma", burstiness=b))]
        gaps = [b - a for a, b in itertools.pairwise(times)]
        return len(times) / 200.0, statistics.pstdev(gaps) / statistics.mean(gaps)

    (r_bursty, cv_bursty), (r_smooth, cv_smooth) = cv(0.25), cv(4.0)
    assert abs(r_bursty - 100) < 8
    assert abs(r_smooth - 100) < 8
    assert cv_bursty > 1.6
    assert cv_smooth < 0.6
    const = [t for _, t, _ in arrivals.schedule(plan(arrival="constant", duration=1.0))]
    assert len(const) in (99, 100)  # one every 10 ms in [0, 1 s)


def test_a_profile_in_the_plan_sets_the_rate_and_ends_the_schedule():
    stepped = list(arrivals.schedule(plan(arrival="constant", stages=((2.0, 10.0), (2.0, 40.0)), duration=None)))
    assert abs(sum(1 for _, t, _ in stepped if t < 2.0) - 20) <= 1
    assert abs(sum(1 for _, t, _ in stepped if t >= 2.0) - 80) <= 1
    assert stepped[-1][1] < 4.0
