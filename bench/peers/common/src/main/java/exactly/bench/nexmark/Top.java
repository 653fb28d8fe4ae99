package exactly.bench.nexmark;

import java.util.ArrayList;
import java.util.List;

/**
 * The values with the highest score seen so far, all of them when several
 * tie: q7's bids at the highest price, q5's auctions with the most bids. A
 * value is an array of fields (a bid's, an auction's and its count); the
 * score is the caller's choice of one of them. A Flink POJO.
 */
public final class Top {
    /** The highest score so far; Long.MIN_VALUE before the first value. */
    public long score = Long.MIN_VALUE;
    /** The values with that score, in the order they came. */
    public List<long[]> ties = new ArrayList<>();

    public Top() {}

    /** Takes value, of the given score, into account; returns this. */
    public Top add(long score, long[] value) {
        if (score > this.score) {
            this.score = score;
            ties.clear();
        }
        if (score == this.score) {
            ties.add(value);
        }
        return this;
    }

    /** Takes the values of other into account; returns this. */
    public Top merge(Top other) {
        for (long[] v : other.ties) {
            add(other.score, v);
        }
        return this;
    }
}
