package exactly.bench.nexmark;

import java.nio.charset.StandardCharsets;
import java.util.Locale;

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

    /** q11's session gap in ms of event time: a bidder's bids less than this apart are one session. */
    public static final long Q11_GAP = 10_000;

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

    /** The q14 bounds, exclusive, in euro cents: a hundredth of Flink's (see bench/nexmark, BidDetail). */
    public static final long Q14_MIN_EURO = 10_000, Q14_MAX_EURO = 500_000;

    /**
     * The output of the stateless query q14, q21 or q22 of event v, or null when it has none (v is
     * not a bid, or the query drops it). These read the bid's channel and url too.
     */
    public static byte[] stateless(String q, byte[] v) {
        Bid b = parseBid(v);
        if (b == null) {
            return null;
        }
        // parseBid checked the fields after "B,": auction,bidder,price,channel,url,dateTime,...
        int start = 2;
        for (int f = 0; f < 3; f++) {
            start = indexOf(v, start) + 1;
        }
        int channelEnd = indexOf(v, start);
        String channel = new String(v, start, channelEnd - start, StandardCharsets.US_ASCII);
        int urlEnd = indexOf(v, channelEnd + 1);
        String url = new String(v, channelEnd + 1, urlEnd - channelEnd - 1, StandardCharsets.US_ASCII);
        switch (q) {
            case "q14" -> {
                long euro = b.price * EURO_NUM / EURO_DEN;
                if (euro <= Q14_MIN_EURO || euro >= Q14_MAX_EURO) {
                    return null;
                }
                long c = url.chars().filter(ch -> ch == 'c').count();
                return ascii(b.auction + "," + b.bidder + "," + euro + "," + bidTimeType(b.dateTime) + "," + b.dateTime + "," + c);
            }
            case "q21" -> {
                String id = switch (channel.toLowerCase(Locale.ROOT)) {
                    case "apple" -> "0";
                    case "google" -> "1";
                    case "facebook" -> "2";
                    case "baidu" -> "3";
                    default -> urlParam(url, "channel_id");
                };
                return id == null ? null : ascii(b.auction + "," + b.bidder + "," + b.price + "," + channel + "," + id);
            }
            case "q22" -> {
                String[] dirs = url.split("/", -1);
                return ascii(b.auction + "," + b.bidder + "," + b.price + "," + channel + "," + piece(dirs, 3) + "," + piece(dirs, 4) + "," + piece(dirs, 5));
            }
            default -> throw new IllegalArgumentException("not a stateless query: " + q);
        }
    }

    private static int indexOf(byte[] v, int from) {
        for (int i = from; i < v.length; i++) {
            if (v[i] == ',') {
                return i;
            }
        }
        throw malformed(v);
    }

    /** q14's kind of the UTC hour of dateTime (Unix ms). */
    static String bidTimeType(long dateTime) {
        long h = Math.floorMod(dateTime, 86_400_000L) / 3_600_000L;
        if (h >= 8 && h <= 18) {
            return "dayTime";
        }
        return h <= 6 || h >= 20 ? "nightTime" : "otherTime";
    }

    /** REGEXP_EXTRACT(url, '(&|^)name=([^&]*)', 2), or null. */
    static String urlParam(String url, String name) {
        for (int i = 0; ; ) {
            if (url.startsWith(name + "=", i)) {
                int j = url.indexOf('&', i);
                return url.substring(i + name.length() + 1, j < 0 ? url.length() : j);
            }
            int j = url.indexOf('&', i);
            if (j < 0) {
                return null;
            }
            i = j + 1;
        }
    }

    /** SPLIT_INDEX's piece i, empty when there are fewer. */
    private static String piece(String[] pieces, int i) {
        return i < pieces.length ? pieces[i] : "";
    }

    /** The q10 output of b: its fields, then its UTC day (yyyy-MM-dd) and minute (HH:mm). */
    public static byte[] q10(Bid b) {
        java.time.LocalDateTime t = java.time.LocalDateTime.ofEpochSecond(Math.floorDiv(b.dateTime, 1000L), 0, java.time.ZoneOffset.UTC);
        return ascii(b.auction + "," + b.bidder + "," + b.price + "," + b.dateTime + ","
                + String.format(Locale.ROOT, "%04d-%02d-%02d,%02d:%02d", t.getYear(), t.getMonthValue(), t.getDayOfMonth(), t.getHour(), t.getMinute()));
    }

    /** The number of keys of q13's side input: a bid's key is its auction mod this. */
    public static final long SIDE_INPUT_KEYS = 10_000;

    /** q13's side input: the file of lines "key,value" the runner wrote, by key. */
    public static java.util.Map<Long, String> loadSideInput(String path) throws java.io.IOException {
        java.util.Map<Long, String> values = new java.util.HashMap<>();
        for (String line : java.nio.file.Files.readAllLines(java.nio.file.Path.of(path), StandardCharsets.US_ASCII)) {
            int c = line.indexOf(',');
            if (c < 0) {
                throw new IllegalArgumentException(path + ": want key,value, got " + line);
            }
            values.put(Long.parseLong(line.substring(0, c)), line.substring(c + 1));
        }
        return values;
    }

    /** The q13 output of b, whose side input value is value. */
    public static byte[] q13(Bid b, String value) {
        return ascii(b.auction + "," + b.bidder + "," + b.price + "," + b.dateTime + "," + value);
    }

    /** The price ranks of q15-q17: rank 1 below RANK2_FROM, rank 3 from RANK3_FROM (bench/nexmark PriceRank). */
    public static final long RANK2_FROM = 1_000, RANK3_FROM = 100_000;

    /** The rank of price, 1 to 3. */
    public static int priceRank(long price) {
        return price < RANK2_FROM ? 1 : price < RANK3_FROM ? 2 : 3;
    }

    /** DATE_FORMAT(dateTime, 'yyyy-MM-dd') in UTC. */
    public static String day(long dateTime) {
        return java.time.LocalDate.ofEpochDay(Math.floorDiv(dateTime, 86_400_000L)).toString();
    }

    /**
     * Adds (sign 1) or subtracts (sign -1) entry to a copy of row, the state of a q15 or q16
     * group: its bids in all and by price rank, its distinct bidders and distinct auctions
     * likewise, then its latest minute of the day. entry is {kind, ...}: kind 'n' the group's
     * bids by rank then its latest minute (which only grows, so a subtraction keeps it), 'b' or
     * 'a' a bidder's or an auction's price ranks seen as a bit set (bit r: rank r).
     */
    public static long[] bidStatsAdd(long[] row, long[] entry, int sign) {
        long[] s = row.clone();
        switch ((char) entry[0]) {
            case 'n' -> {
                for (int i = 0; i < 4; i++) {
                    s[i] += sign * entry[1 + i];
                }
                if (sign > 0) {
                    s[12] = Math.max(s[12], entry[5]);
                }
            }
            case 'b', 'a' -> {
                int at = entry[0] == 'b' ? 4 : 8;
                long seen = entry[1];
                if (seen != 0) {
                    s[at] += sign;
                }
                for (int r = 1; r <= 3; r++) {
                    if ((seen & 1L << r) != 0) {
                        s[at + r] += sign;
                    }
                }
            }
            default -> throw new IllegalArgumentException("q15/q16: unknown entry kind " + entry[0]);
        }
        return s;
    }

    /** The row of q15 (q16 with minute) of group, "day" or "channel,day", of state row (see {@link #bidStatsAdd}). */
    public static byte[] bidStats(String group, long[] row, boolean minute) {
        StringBuilder b = new StringBuilder(group);
        if (minute) {
            b.append(String.format(",%02d:%02d", row[12] / 60, row[12] % 60));
        }
        for (int i = 0; i < 12; i++) {
            b.append(',').append(row[i]);
        }
        return ascii(b.toString());
    }

    /** q17's state: bids in all and by rank, then min, max and sum of the prices; {@link #q17Add} counts a bid. */
    public static long[] q17Add(long[] s, long price) {
        s[4] = s[0] == 0 ? price : Math.min(s[4], price);
        s[5] = Math.max(s[5], price);
        s[6] += price;
        s[0]++;
        s[priceRank(price)]++;
        return s;
    }

    /** q17's row of the group "auction,day" of state s. */
    public static byte[] q17(String key, long[] s) {
        return ascii(key + "," + s[0] + "," + s[1] + "," + s[2] + "," + s[3] + "," + s[4] + "," + s[5] + "," + (s[6] / s[0]) + "," + s[6]);
    }

    /** The row q18 and q19 output of bid v: "auction,bidder,price,channel,url,dateTime", or null when v is not a bid. */
    public static String bidRow(byte[] v) {
        if (parseBid(v) == null) {
            return null;
        }
        String[] f = new String(v, StandardCharsets.US_ASCII).split(",", -1);
        return f[1] + "," + f[2] + "," + f[3] + "," + f[4] + "," + f[5] + "," + f[6];
    }

    /** Whether q18 keeps bid row a over b (bench/nexmark LaterBid): a later dateTime, then a higher price, then a greater url. */
    public static boolean laterBid(String a, String b) {
        String[] x = a.split(","), y = b.split(",");
        int c = Long.compare(Long.parseLong(x[5]), Long.parseLong(y[5]));
        if (c == 0) {
            c = Long.compare(Long.parseLong(x[2]), Long.parseLong(y[2]));
        }
        return c == 0 ? x[4].compareTo(y[4]) > 0 : c > 0;
    }

    /** Whether q19 ranks bid row a above b (bench/nexmark HigherBid): a higher price, then an earlier dateTime, then a smaller url. */
    public static boolean higherBid(String a, String b) {
        String[] x = a.split(","), y = b.split(",");
        int c = Long.compare(Long.parseLong(x[2]), Long.parseLong(y[2]));
        if (c == 0) {
            c = Long.compare(Long.parseLong(y[5]), Long.parseLong(x[5]));
        }
        return c == 0 ? x[4].compareTo(y[4]) < 0 : c > 0;
    }

    /** The dateTime of event v: a bid's, a person's or an auction's. */
    public static long dateTime(byte[] v) {
        Bid b = parseBid(v);
        if (b != null) {
            return b.dateTime;
        }
        String[] f = new String(v, StandardCharsets.US_ASCII).split(",", -1);
        // P,id,name,email,creditCard,city,state,dateTime,extra or
        // A,id,itemName,description,initialBid,reserve,dateTime,expires,seller,category,extra
        int at = v[0] == 'P' ? 7 : v[0] == 'A' ? 6 : -1;
        if (at < 0 || f.length != (v[0] == 'P' ? 9 : 11)) {
            throw malformed(v);
        }
        return Long.parseLong(f[at]);
    }

    /** The row "id,name" of person v, or null when v is not a person. */
    public static String personRow(byte[] v) {
        if (v.length < 2 || v[1] != ',') {
            throw malformed(v);
        }
        if (v[0] != 'P') {
            return null;
        }
        String[] f = new String(v, StandardCharsets.US_ASCII).split(",", -1);
        if (f.length != 9) {
            throw malformed(v);
        }
        return f[1] + "," + f[2];
    }

    /** q8's tumbling window, ms of event time. */
    public static final long Q8_SIZE = 10_000;

    /** The q8 output of person id, named name, in the window starting at start: "id,name,windowStart". */
    public static byte[] q8(long id, String name, long start) {
        return (id + "," + name + "," + start).getBytes(StandardCharsets.UTF_8);
    }

    /** q3's category of auctions. */
    public static final long Q3_CATEGORY = 10;

    /**
     * The auction of event v as "id,itemName,description,initialBid,reserve,dateTime,expires,seller,category"
     * (its fields without the kind and the extra), or null when v is not an auction.
     */
    public static String auctionRow(byte[] v) {
        if (v.length < 2 || v[1] != ',') {
            throw malformed(v);
        }
        if (v[0] != 'A') {
            return null;
        }
        String line = new String(v, StandardCharsets.US_ASCII);
        int end = line.lastIndexOf(',');
        if (end < 2 || line.split(",", -1).length != 11) {
            throw malformed(v);
        }
        return line.substring(2, end);
    }

    /** q20's category of auctions. */
    public static final long Q20_CATEGORY = 10;

    /** Field i of the comma-separated row, as a long. */
    public static long field(String row, int i) {
        return Long.parseLong(row.split(",", -1)[i]);
    }

    /** The q20 output of bid row b (bidRow) on auction row a (auctionRow): b, then a without its id. */
    public static byte[] q20(String b, String a) {
        return ascii(b + "," + a.substring(a.indexOf(',') + 1));
    }

    /** Whether bid row b (bidRow) lies in the lifetime of auction row a (auctionRow), which q9 and q4 count. */
    public static boolean inAuction(String b, String a) {
        long t = field(b, 5);
        return t >= field(a, 5) && t <= field(a, 6);
    }

    /** The q9 row of auction row a won by bid row b: a, then the bid's bidder, price and dateTime. */
    public static byte[] q9(String a, String b) {
        String[] f = b.split(",", -1);
        return ascii(a + "," + f[1] + "," + f[2] + "," + f[5]);
    }

    /** The q4 row of category, whose auctions' final prices sum to sum: "category,average,auctions". */
    public static byte[] q4(long category, long sum, long auctions) {
        return ascii(category + "," + (sum / auctions) + "," + auctions);
    }

    /**
     * q3's part of event v: for a person in Oregon, Idaho or California, {id, "name,city,state"};
     * for an auction of category Q3_CATEGORY, {id, seller}; else null.
     */
    public static Object[] q3Part(byte[] v) {
        if (v.length < 2 || v[1] != ',') {
            throw malformed(v);
        }
        if (v[0] != 'P' && v[0] != 'A') {
            return null;
        }
        String[] f = new String(v, StandardCharsets.US_ASCII).split(",", -1);
        if (v[0] == 'P') { // P,id,name,email,creditCard,city,state,dateTime,extra
            if (f.length != 9) {
                throw malformed(v);
            }
            return switch (f[6]) {
                case "OR", "ID", "CA" -> new Object[] {Long.parseLong(f[1]), f[2] + "," + f[5] + "," + f[6]};
                default -> null;
            };
        }
        if (f.length != 11) { // A,id,itemName,description,initialBid,reserve,dateTime,expires,seller,category,extra
            throw malformed(v);
        }
        return Long.parseLong(f[9]) == Q3_CATEGORY ? new Object[] {Long.parseLong(f[1]), Long.parseLong(f[8])} : null;
    }

    /** The q3 output of auction id sold by the person whose fields are "name,city,state". */
    public static byte[] q3(String person, long auction) {
        return ascii(person + "," + auction);
    }

    /** The q7 output of a bid at the highest price of the window starting at start. */
    public static byte[] q7(long start, long auction, long bidder, long price, long dateTime) {
        return ascii(start + "," + auction + "," + bidder + "," + price + "," + dateTime);
    }

    /** The q11 output of a session of bidder: its bids, its first bid's dateTime, and its end (the last's plus Q11_GAP). */
    public static byte[] q11(long bidder, long count, long start, long end) {
        return ascii(bidder + "," + count + "," + start + "," + end);
    }

    /** The q5 output of an auction with the most bids, count, in the window starting at start. */
    public static byte[] q5(long start, long auction, long count) {
        return ascii(start + "," + auction + "," + count);
    }

    private static byte[] ascii(String s) {
        return s.getBytes(StandardCharsets.US_ASCII);
    }
}
