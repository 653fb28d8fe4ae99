package exactly.bench.nexmark;

import java.nio.charset.StandardCharsets;

/**
 * The Nexmark queries of bench/nexmark (Go), byte for byte, shared by the
 * Flink and Kafka Streams peers: an event is a line of comma-separated fields
 * whose first field is its kind ("P", "A" or "B"); a bid is
 * {@code B,auction,bidder,price,channel,url,dateTime,extra}. The windowed
 * queries q5 and q7 are defined in bench/nexmark's package documentation.
 */
public final class Nexmark {
    private Nexmark() {}

    /** The q1 conversion: priceEuro = price * EURO_NUM / EURO_DEN. */
    public static final long EURO_NUM = 908, EURO_DEN = 1000;

    /** q2 selects the bids whose auction is a multiple of Q2_MODULUS. */
    public static final long Q2_MODULUS = 123;

    /** q7's tumbling windows: their size in ms of event time (a bid's dateTime), aligned to the Unix epoch. */
    public static final long Q7_SIZE = 10_000;

    /** q5's sliding windows: their size and period in ms of event time, aligned to the Unix epoch. */
    public static final long Q5_SIZE = 10_000, Q5_SLIDE = 2_000;

    /** The disorder of bids q5 and q7 allow, ms: the watermark's delay (Flink) or the windows' grace period (Kafka Streams). */
    public static final long MAX_OUT_OF_ORDERNESS = 1_000;

    /** The fields of a bid the queries read. A Flink POJO. */
    public static final class Bid {
        public long auction, bidder, price, dateTime;
        /** The timestamp of the input record, Unix ms, for a peer to carry along; parseBid leaves it 0. */
        public long ts;

        public Bid() {}
    }

    /** Parses v: a Bid, or null when v is a person or an auction. */
    public static Bid parseBid(byte[] v) {
        if (v.length < 2 || v[1] != ',') {
            throw malformed(v);
        }
        if (v[0] != 'B') {
            return null;
        }
        Bid b = new Bid();
        int start = 2;
        for (int field = 0; field < 6; field++) {
            int end = start;
            while (end < v.length && v[end] != ',') {
                end++;
            }
            if (end == v.length) {
                throw malformed(v);
            }
            switch (field) {
                case 0 -> b.auction = parseLong(v, start, end);
                case 1 -> b.bidder = parseLong(v, start, end);
                case 2 -> b.price = parseLong(v, start, end);
                case 5 -> b.dateTime = parseLong(v, start, end);
                default -> {}
            }
            start = end + 1;
        }
        return b;
    }

    private static long parseLong(byte[] v, int from, int to) {
        if (from == to) {
            throw malformed(v);
        }
        boolean neg = v[from] == '-';
        long n = 0;
        for (int i = neg ? from + 1 : from; i < to; i++) {
            int d = v[i] - '0';
            if (d < 0 || d > 9) {
                throw malformed(v);
            }
            n = n * 10 + d;
        }
        return neg ? -n : n;
    }

    private static IllegalArgumentException malformed(byte[] v) {
        return new IllegalArgumentException("nexmark: malformed event: " + new String(v, StandardCharsets.UTF_8));
    }

    /** The q1 output of b. */
    public static byte[] q1(Bid b) {
        return ascii(b.auction + "," + b.bidder + "," + (b.price * EURO_NUM / EURO_DEN) + "," + b.dateTime);
    }

    /** Whether q2 outputs b. */
    public static boolean q2Selects(Bid b) {
        return b.auction % Q2_MODULUS == 0;
    }

    /** The q2 output of b. */
    public static byte[] q2(Bid b) {
        return ascii(b.auction + "," + b.price);
    }

    /** The count output: an auction and its running number of bids. */
    public static byte[] count(long auction, long n) {
        return ascii(auction + "," + n);
    }

    /** The q7 output of a bid at the highest price of the window starting at start. */
    public static byte[] q7(long start, long auction, long bidder, long price, long dateTime) {
        return ascii(start + "," + auction + "," + bidder + "," + price + "," + dateTime);
    }

    /** The q5 output of an auction with the most bids, count, in the window starting at start. */
    public static byte[] q5(long start, long auction, long count) {
        return ascii(start + "," + auction + "," + count);
    }

    private static byte[] ascii(String s) {
        return s.getBytes(StandardCharsets.US_ASCII);
    }
}
