package icebox.functions;

import com.google.gson.JsonArray;
import com.google.gson.JsonObject;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.SplittableRandom;

/**
 * hotel-searching (Desiccant's Java set; the three-function search of DeathStarBench's hotel
 * reservation): searches hotels with preferences. A city of {@code hotels} hotels, each with a
 * location, stars, a review score, amenities and 30 days of room availability, is generated from
 * {@code seed}; then {@code queries} searches run the chain's stages:
 * <ol>
 *   <li>geo: hotels within the radius of the guest's position, from a grid index;</li>
 *   <li>rate: the nightly rates for the stay (weekends and demand raise them) and availability
 *       of every night, filtered by the price limit, minimum stars and required amenities;</li>
 *   <li>rank: order by the guest's preference (price, distance or rating) and keep the top 10.</li>
 * </ol>
 */
public final class HotelSearching {
    static final int DAYS = 30;
    static final int TOP = 10;
    // A city of about 11 x 11 km around its centre.
    static final double LAT0 = 37.75;
    static final double LON0 = -122.45;
    static final double SPAN = 0.1;
    static final double CELL = 0.005; // grid cell, about 550 m
    static final String[] AMENITIES = {"wifi", "parking", "pool", "gym", "breakfast", "spa", "pets"};
    static final String[] SORTS = {"price", "distance", "rating"};

    private HotelSearching() {}

    record Hotel(int id, String name, double lat, double lon, int stars, double score, int amenities,
            int basePrice, int[] rooms) {}

    record Query(double lat, double lon, double radiusKm, int checkIn, int nights, int maxPrice,
            int minStars, int amenities, String sort) {}

    record Match(Hotel hotel, double distanceKm, int totalPrice) {}

    /** The geo service's index: hotel lists by grid cell. */
    static final class City {
        final List<Hotel> hotels;
        final Map<Long, List<Hotel>> grid = new HashMap<>();

        City(List<Hotel> hotels) {
            this.hotels = hotels;
            for (Hotel h : hotels) {
                grid.computeIfAbsent(cell(h.lat, h.lon), k -> new ArrayList<>()).add(h);
            }
        }

        static long cell(double lat, double lon) {
            return (long) Math.floor(lat / CELL) << 32 ^ (long) Math.floor(lon / CELL) & 0xffffffffL;
        }

        List<Match> nearby(Query q) {
            // 111 km per degree, a little under the haversine's 111.2, errs towards a larger box.
            double dLat = q.radiusKm / 111.0;
            double dLon = q.radiusKm / (111.0 * Math.cos(Math.toRadians(q.lat)));
            List<Match> found = new ArrayList<>();
            for (long y = (long) Math.floor((q.lat - dLat) / CELL); y <= (long) Math.floor((q.lat + dLat) / CELL); y++) {
                for (long x = (long) Math.floor((q.lon - dLon) / CELL); x <= (long) Math.floor((q.lon + dLon) / CELL); x++) {
                    List<Hotel> list = grid.get(y << 32 ^ x & 0xffffffffL);
                    if (list == null) {
                        continue;
                    }
                    for (Hotel h : list) {
                        double d = distanceKm(q.lat, q.lon, h.lat, h.lon);
                        if (d <= q.radiusKm) {
                            found.add(new Match(h, d, 0));
                        }
                    }
                }
            }
            return found;
        }
    }

    public static JsonObject main(JsonObject args) {
        int hotels = Params.integer(args, "hotels", 10_000, 1, 1_000_000);
        int queries = Params.integer(args, "queries", 400, 0, 1_000_000);
        long seed = Params.longValue(args, "seed", 42, 0, Long.MAX_VALUE);
        SplittableRandom random = new SplittableRandom(seed);
        City city = new City(generateHotels(hotels, random));

        long candidates = 0;
        long matches = 0;
        long checksum = 0;
        JsonArray first = new JsonArray();
        for (int i = 0; i < queries; i++) {
            Query q = randomQuery(random);
            List<Match> near = city.nearby(q);
            candidates += near.size();
            List<Match> ranked = rank(rate(near, q), q);
            matches += ranked.size();
            for (Match m : ranked) {
                checksum = checksum * 31 + m.hotel.id;
            }
            if (i == 0) {
                for (Match m : ranked) {
                    JsonObject o = new JsonObject();
                    o.addProperty("id", m.hotel.id);
                    o.addProperty("name", m.hotel.name);
                    o.addProperty("distance_km", Math.round(m.distanceKm * 1000) / 1000.0);
                    o.addProperty("total_price", m.totalPrice);
                    o.addProperty("stars", m.hotel.stars);
                    o.addProperty("score", m.hotel.score);
                    first.add(o);
                }
            }
        }
        JsonObject result = new JsonObject();
        result.addProperty("hotels", hotels);
        result.addProperty("queries", queries);
        result.addProperty("candidates", candidates);
        result.addProperty("results", matches);
        result.addProperty("checksum", checksum);
        result.add("first_query_results", first);
        return result;
    }

    static List<Hotel> generateHotels(int count, SplittableRandom random) {
        List<Hotel> list = new ArrayList<>(count);
        for (int id = 0; id < count; id++) {
            // Hotels cluster towards the centre: the mean of two uniforms is triangular.
            double lat = LAT0 + SPAN * ((random.nextDouble() + random.nextDouble()) / 2 - 0.5);
            double lon = LON0 + SPAN * ((random.nextDouble() + random.nextDouble()) / 2 - 0.5);
            int stars = 1 + random.nextInt(5);
            double score = Math.round((5 + random.nextDouble() * 5) * 10) / 10.0;
            int amenities = random.nextInt(1 << AMENITIES.length);
            int basePrice = 40 + stars * 35 + random.nextInt(60);
            int[] rooms = new int[DAYS];
            for (int d = 0; d < DAYS; d++) {
                rooms[d] = random.nextInt(4) == 0 ? 0 : 1 + random.nextInt(20);
            }
            list.add(new Hotel(id, "Hotel " + id, lat, lon, stars, score, amenities, basePrice, rooms));
        }
        return list;
    }

    static Query randomQuery(SplittableRandom random) {
        int amenities = 0;
        for (int k = 0; k < 2; k++) {
            if (random.nextInt(3) == 0) {
                amenities |= 1 << random.nextInt(AMENITIES.length);
            }
        }
        return new Query(
                LAT0 + SPAN * (random.nextDouble() - 0.5) * 0.8,
                LON0 + SPAN * (random.nextDouble() - 0.5) * 0.8,
                0.3 + random.nextDouble() * 1.2,
                random.nextInt(DAYS - 3),
                1 + random.nextInt(3),
                150 + random.nextInt(600),
                1 + random.nextInt(4),
                amenities,
                SORTS[random.nextInt(SORTS.length)]);
    }

    /** The rate service: price of the whole stay, or the hotel drops out. */
    static List<Match> rate(List<Match> near, Query q) {
        List<Match> priced = new ArrayList<>();
        for (Match m : near) {
            Hotel h = m.hotel;
            if (h.stars < q.minStars || (h.amenities & q.amenities) != q.amenities) {
                continue;
            }
            int total = 0;
            boolean available = true;
            for (int d = q.checkIn; d < q.checkIn + q.nights && available; d++) {
                available = h.rooms[d] > 0;
                total += nightlyRate(h, d);
            }
            if (available && total <= q.maxPrice * q.nights) {
                priced.add(new Match(h, m.distanceKm, total));
            }
        }
        return priced;
    }

    /** Fridays and Saturdays cost 25% more; scarce rooms up to 40% more. */
    static int nightlyRate(Hotel h, int day) {
        double rate = h.basePrice * (day % 7 == 4 || day % 7 == 5 ? 1.25 : 1.0);
        rate *= 1.0 + 0.4 * Math.max(0, 5 - h.rooms[day]) / 5.0;
        return (int) Math.round(rate);
    }

    static List<Match> rank(List<Match> priced, Query q) {
        Comparator<Match> order = switch (q.sort) {
            case "price" -> Comparator.comparingInt(Match::totalPrice);
            case "distance" -> Comparator.comparingDouble(Match::distanceKm);
            default -> Comparator.comparingDouble((Match m) -> -m.hotel.score)
                    .thenComparingInt(m -> -m.hotel.stars);
        };
        priced.sort(order.thenComparingInt(m -> m.hotel.id));
        return priced.size() > TOP ? new ArrayList<>(priced.subList(0, TOP)) : priced;
    }

    static double distanceKm(double lat1, double lon1, double lat2, double lon2) {
        double p1 = Math.toRadians(lat1);
        double p2 = Math.toRadians(lat2);
        double dp = p2 - p1;
        double dl = Math.toRadians(lon2 - lon1);
        double a = Math.sin(dp / 2) * Math.sin(dp / 2) + Math.cos(p1) * Math.cos(p2) * Math.sin(dl / 2) * Math.sin(dl / 2);
        return 2 * 6371.0 * Math.asin(Math.sqrt(a));
    }
}
